// libFuzzer target: parses the input as one whole GGUF file image and reads everything back.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/model/gguf_file.h"

namespace {

uint64_t touch(const tandem::model::GgufValue& v) {
  uint64_t sum = static_cast<uint64_t>(v.type());
  if (v.is_array()) {
    // Every accessor must fail cleanly or succeed; none may read outside the input.
    if (auto s = v.to_string_array(); s.ok()) {
      for (std::string_view e : *s) sum += e.size() + (e.empty() ? 0 : e.front());
    }
    if (auto i = v.to_i64_array(); i.ok()) sum += i->size();
    if (auto f = v.to_f32_array(); f.ok()) sum += f->size();
    if (auto b = v.to_bool_array(); b.ok()) sum += b->size();
    const uint64_t n = v.array_size();
    if (n > 0) sum += touch(v.element(0)) + touch(v.element(n - 1));
    return sum;
  }
  if (auto u = v.to_u64(); u.ok()) sum += *u;
  if (auto i = v.to_i32(); i.ok()) sum += static_cast<uint64_t>(*i);
  if (auto f = v.to_f32(); f.ok()) sum += static_cast<uint64_t>(*f != 0.0f);
  if (auto s = v.to_string(); s.ok()) sum += s->size() + (s->empty() ? 0 : s->back());
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tandem::Result<tandem::model::GgufFile> r =
      tandem::model::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!r.ok()) return 0;
  uint64_t sum = r->version() + r->alignment() + r->data_offset();
  for (const tandem::model::GgufKeyValue& kv : r->metadata()) {
    sum += kv.key.size() + touch(kv.value) + kv.value.debug_string().size();
    if (r->find(kv.key) != &kv.value) __builtin_trap();
    sum += r->get_u32(kv.key).ok() + r->get_string(kv.key).ok();
  }
  for (const tandem::model::TensorInfo& t : r->tensors()) {
    // Every view must lie inside the input; touching its ends lets ASan confirm it.
    if (t.data.empty() || t.data.data() < data || t.data.data() + t.data.size() > data + size) {
      __builtin_trap();
    }
    sum += t.data.front() + t.data.back() + t.shape.size();
    if (r->find_tensor(t.name) != &t) __builtin_trap();
  }
  static volatile uint64_t sink;
  sink = sink ^ sum;
  return 0;
}
