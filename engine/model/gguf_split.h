// Split GGUF models: one model written as several files, PREFIX-00001-of-0000N.gguf to
// PREFIX-0000N-of-0000N.gguf (numbers from 1, five digits), as llama.cpp's gguf-split and the
// `gguf` package's GGUFWriter write the large ones (Hugging Face caps a file at 50 GB, so every
// DeepSeek-V3, Kimi-K2, GLM-4.5 or gpt-oss-120b GGUF comes in shards). The first shard holds
// all of the model's metadata; every shard holds split.no (its index from 0), split.count (N),
// split.tensors.count (the model's tensors, all shards together) and its share of the tensors
// (the first may hold none).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "engine/model/gguf_file.h"

namespace tandem::model {

// The split.* keys of one file; a file without split.count is a whole model (index 0, count 1).
struct GgufSplitKeys {
  uint32_t index = 0;
  uint32_t count = 1;
  std::optional<uint64_t> tensors;  // split.tensors.count when present
};

// INVALID_ARGUMENT (naming the file and key) for a count of 0, an index not below the count or a
// negative tensor count; the getters' errors for keys of the wrong type.
Result<GgufSplitKeys> read_gguf_split_keys(const GgufFile& file);

// The path of shard `index` (from 0) of `count`: PREFIX-%05d-of-%05d.gguf with index + 1.
std::string gguf_shard_path(std::string_view prefix, uint32_t index, uint32_t count);

// A file name's stem without a shard's "-00001-of-00009" ending (five or more digits each), for
// naming the model; other stems unchanged.
std::string strip_gguf_shard_suffix(std::string_view stem);

// Opens the GGUF model at `path`: a whole file, or the first shard of a split model, whose later
// shards are opened from the names beside it (same folder and prefix) and adopted
// (GgufFile::shards: the returned file's tensors() then lists every shard's tensors). Errors,
// each naming the file:
// - `path` is a later shard (split.no > 0): INVALID_ARGUMENT naming the first shard to open;
// - the first shard's name does not end in -00001-of-0000N.gguf for its split.count, so the
//   others cannot be found: INVALID_ARGUMENT;
// - a shard missing (NOT_FOUND) or malformed (the reader's error), its split.no not its place,
//   its split.count or split.tensors.count not the first shard's, a tensor in two shards, or
//   split.tensors.count not the number of tensors found: INVALID_ARGUMENT.
Result<GgufFile> open_gguf_model(const std::string& path, const GgufLimits& limits = {});

// OK for a whole file or a first shard; for a later shard, the INVALID_ARGUMENT of
// open_gguf_model. For readers of the metadata alone (tokenizers), which open one file.
Status check_not_later_gguf_shard(const GgufFile& file);

}  // namespace tandem::model
