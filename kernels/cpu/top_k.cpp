// top_k by insertion into a sorted prefix.
#include "kernels/cpu/top_k.h"

#include <cmath>
#include <cstdint>

#include "base/check.h"

namespace tandem::kernels {
namespace {

// Whether entry (va, ia) ranks before (vb, ib): larger value first, NaN last, lower index on ties.
bool ranks_before(float va, size_t ia, float vb, size_t ib) {
  const bool na = std::isnan(va);
  const bool nb = std::isnan(vb);
  if (na != nb) return nb;
  if (!na && va != vb) return va > vb;
  return ia < ib;
}

}  // namespace

void top_k(std::span<const float> values, std::span<int32_t> indices, std::span<float> out_values) {
  const size_t k = indices.size();
  TANDEM_CHECK(out_values.size() == k && k <= values.size());
  TANDEM_CHECK(values.size() <= static_cast<size_t>(INT32_MAX));
  if (k == 0) return;
  size_t filled = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    // Indices grow, so an entry equal to the current k-th does not displace it.
    if (filled == k &&
        !ranks_before(v, i, out_values[k - 1], static_cast<size_t>(indices[k - 1]))) {
      continue;
    }
    size_t pos = filled < k ? filled++ : k - 1;
    while (pos > 0 &&
           ranks_before(v, i, out_values[pos - 1], static_cast<size_t>(indices[pos - 1]))) {
      out_values[pos] = out_values[pos - 1];
      indices[pos] = indices[pos - 1];
      --pos;
    }
    out_values[pos] = v;
    indices[pos] = static_cast<int32_t>(i);
  }
}

}  // namespace tandem::kernels
