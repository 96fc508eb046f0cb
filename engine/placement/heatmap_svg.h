// heatmap_svg: the layers x experts activation table as an SVG heat map, GPU experts outlined.
#pragma once

#include <string>

#include "engine/placement/expert_table.h"
#include "engine/placement/planner.h"

namespace tandem::placement {

// A standalone SVG document: one rectangle per (layer, expert) coloured by its share of the
// table's maximum (square-root scale, dark blue -> yellow), GPU experts outlined in red, axis
// labels, a colour legend and a title line. `map` may be null (no outlines); when given it has
// the table's shape. Pure; any thread.
std::string heatmap_svg(const ExpertTable& table, const DeviceMap* map, const std::string& title);

}  // namespace tandem::placement
