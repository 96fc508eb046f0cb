// heatmap_svg: writes the activation heat map as SVG text (no library).
#include "engine/placement/heatmap_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tandem::placement {

namespace {

struct Rgb {
  double r, g, b;
};

// Five stops of a perceptually ordered dark-blue -> green -> yellow scale.
constexpr Rgb kStops[] = {
    {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};

std::string colour(double t) {
  t = std::clamp(t, 0.0, 1.0) * 4.0;
  const int i = std::min(3, static_cast<int>(t));
  const double f = t - i;
  const Rgb& a = kStops[i];
  const Rgb& b = kStops[i + 1];
  char buf[16];
  std::snprintf(buf, sizeof(buf), "#%02x%02x%02x", static_cast<int>(a.r + f * (b.r - a.r) + 0.5),
                static_cast<int>(a.g + f * (b.g - a.g) + 0.5),
                static_cast<int>(a.b + f * (b.b - a.b) + 0.5));
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string short_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

// A tick step (1, 2, 4, 5, 8, 10, ...) giving at most `max_ticks` ticks over n items.
size_t tick_step(size_t n, size_t max_ticks) {
  size_t step = 1;
  const size_t kSteps[] = {1,  2,  4,  5,   8,   10,  16,  20,  25,
                           32, 50, 64, 100, 128, 200, 256, 500, 1000};
  for (size_t s : kSteps) {
    step = s;
    if (n / s <= max_ticks) break;
  }
  return step;
}

}  // namespace

std::string heatmap_svg(const ExpertTable& table, const DeviceMap* map, const std::string& title) {
  const size_t rows = table.n_rows();
  const uint64_t cols = table.n_experts;
  const double cw = std::clamp(900.0 / static_cast<double>(std::max<uint64_t>(cols, 1)), 3.0, 28.0);
  const double ch = std::clamp(600.0 / static_cast<double>(std::max<size_t>(rows, 1)), 6.0, 28.0);
  const double left = 70, top = 50, legend_w = 200, bottom = 60;
  const double grid_w = cw * static_cast<double>(cols);
  const double grid_h = ch * static_cast<double>(rows);
  const double width = left + grid_w + legend_w;
  const double height = top + std::max(grid_h, 220.0) + bottom;
  double max_v = 0;
  for (double v : table.values) max_v = std::max(max_v, v);

  std::string s;
  s.reserve(rows * cols * 90 + 4096);
  s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" +
       num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
       "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(left) + "\" y=\"24\" font-size=\"15\">" + escape(title) + "</text>\n";

  // Cells.
  s += "<g shape-rendering=\"crispEdges\">\n";
  for (size_t r = 0; r < rows; ++r) {
    for (uint64_t e = 0; e < cols; ++e) {
      const double v = table.at(r, e);
      const double t = max_v > 0 ? std::sqrt(v / max_v) : 0.0;
      s += "<rect x=\"" + num(left + cw * static_cast<double>(e)) + "\" y=\"" +
           num(top + ch * static_cast<double>(r)) + "\" width=\"" + num(cw) + "\" height=\"" +
           num(ch) + "\" fill=\"" + colour(t) + "\"><title>layer " +
           std::to_string(table.layers[r]) + ", expert " + std::to_string(e) + ": " + num(v) +
           "</title></rect>\n";
    }
  }
  s += "</g>\n";

  // GPU outlines, drawn over the cells.
  if (map != nullptr) {
    const double sw = std::clamp(std::min(cw, ch) / 5.0, 0.8, 2.0);
    s += "<g fill=\"none\" stroke=\"#ff2020\" stroke-width=\"" + num(sw) + "\">\n";
    for (size_t r = 0; r < rows && r < map->layers().size(); ++r) {
      for (uint64_t e = 0; e < cols && e < map->n_experts(); ++e) {
        if (map->at_row(r, e) != Device::kGpu) continue;
        s += "<rect x=\"" + num(left + cw * static_cast<double>(e) + sw / 2) + "\" y=\"" +
             num(top + ch * static_cast<double>(r) + sw / 2) + "\" width=\"" + num(cw - sw) +
             "\" height=\"" + num(ch - sw) + "\"/>\n";
      }
    }
    s += "</g>\n";
  }

  // Axes: layer labels on the left, expert labels below.
  s += "<g fill=\"black\">\n";
  const size_t rstep = tick_step(rows, 20);
  for (size_t r = 0; r < rows; r += rstep) {
    s += "<text x=\"" + num(left - 6) + "\" y=\"" +
         num(top + ch * (static_cast<double>(r) + 0.5) + 4) + "\" text-anchor=\"end\">" +
         std::to_string(table.layers[r]) + "</text>\n";
  }
  const size_t estep = tick_step(cols, 16);
  for (uint64_t e = 0; e < cols; e += estep) {
    s += "<text x=\"" + num(left + cw * (static_cast<double>(e) + 0.5)) + "\" y=\"" +
         num(top + grid_h + 16) + "\" text-anchor=\"middle\">" + std::to_string(e) + "</text>\n";
  }
  s += "<text x=\"" + num(left + grid_w / 2) + "\" y=\"" + num(top + grid_h + 40) +
       "\" text-anchor=\"middle\" font-size=\"13\">expert</text>\n";
  s += "<text x=\"18\" y=\"" + num(top + grid_h / 2) +
       "\" text-anchor=\"middle\" font-size=\"13\" "
       "transform=\"rotate(-90 18 " +
       num(top + grid_h / 2) + ")\">MoE layer</text>\n";
  s += "</g>\n";

  // Legend: a vertical colour bar (top = max), its labels, and the GPU outline sample.
  const double lx = left + grid_w + 30, ly = top, lh = 160, lw = 16;
  s += "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n";
  for (int i = 0; i <= 10; ++i) {
    s += "<stop offset=\"" + num(i / 10.0) + "\" stop-color=\"" + colour(i / 10.0) + "\"/>\n";
  }
  s += "</linearGradient></defs>\n";
  s += "<rect x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" width=\"" + num(lw) + "\" height=\"" +
       num(lh) + "\" fill=\"url(#scale)\" stroke=\"black\" stroke-width=\"0.5\"/>\n";
  s +=
      "<text x=\"" + num(lx + lw + 6) + "\" y=\"" + num(ly + 10) + "\">" + num(max_v) + "</text>\n";
  s += "<text x=\"" + num(lx + lw + 6) + "\" y=\"" + num(ly + lh / 4 + 4) + "\">" +
       short_num(max_v * 0.5625) + "</text>\n";
  s += "<text x=\"" + num(lx + lw + 6) + "\" y=\"" + num(ly + lh) + "\">0</text>\n";
  s += "<text x=\"" + num(lx) + "\" y=\"" + num(ly + lh + 20) + "\">activations</text>\n";
  s += "<text x=\"" + num(lx) + "\" y=\"" + num(ly + lh + 34) + "\">(square-root scale)</text>\n";
  if (map != nullptr) {
    s += "<rect x=\"" + num(lx) + "\" y=\"" + num(ly + lh + 46) +
         "\" width=\"14\" height=\"14\" fill=\"#3b528b\" stroke=\"#ff2020\" stroke-width=\"2\"/>\n";
    s += "<text x=\"" + num(lx + 20) + "\" y=\"" + num(ly + lh + 58) + "\">GPU expert</text>\n";
  }
  s += "</svg>\n";
  return s;
}

}  // namespace tandem::placement
