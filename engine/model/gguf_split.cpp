// Split GGUF models: the split.* keys, shard names and opening every shard of a model.
#include "engine/model/gguf_split.h"

#include <cstdio>
#include <utility>

namespace tandem::model {

namespace {

constexpr std::string_view kSplitIndex = "split.no";
constexpr std::string_view kSplitCount = "split.count";
constexpr std::string_view kSplitTensors = "split.tensors.count";

// "-00002-of-00009.gguf"
std::string shard_suffix(uint32_t index, uint32_t count) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "-%05u-of-%05u.gguf", index + 1, count);
  return buf;
}

std::string shard_words(uint32_t index, uint32_t count) {
  return "shard " + std::to_string(index + 1) + " of " + std::to_string(count);
}

// The prefix of a path named as shard `index` of `count`; nullopt when the name is not that.
std::optional<std::string> shard_prefix(const std::string& path, uint32_t index, uint32_t count) {
  const std::string suffix = shard_suffix(index, count);
  if (path.size() <= suffix.size() ||
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return std::nullopt;
  }
  return path.substr(0, path.size() - suffix.size());
}

}  // namespace

Result<GgufSplitKeys> read_gguf_split_keys(const GgufFile& file) {
  GgufSplitKeys keys;
  if (!file.contains(kSplitCount)) return keys;
  TANDEM_ASSIGN_OR_RETURN(keys.count, file.get_u32(kSplitCount));
  TANDEM_ASSIGN_OR_RETURN(keys.index, file.get_u32_or(kSplitIndex, 0));
  if (keys.count == 0) {
    return invalid_argument_error(file.name() + ": key 'split.count' is 0; a split model has at " +
                                  "least one shard");
  }
  if (keys.index >= keys.count) {
    return invalid_argument_error(file.name() + ": key 'split.no' is " +
                                  std::to_string(keys.index) + ", not below split.count " +
                                  std::to_string(keys.count));
  }
  if (file.contains(kSplitTensors)) {
    TANDEM_ASSIGN_OR_RETURN(const int64_t tensors, file.get_i64(kSplitTensors));
    if (tensors < 0) {
      return invalid_argument_error(file.name() + ": key 'split.tensors.count' is negative (" +
                                    std::to_string(tensors) + ")");
    }
    keys.tensors = static_cast<uint64_t>(tensors);
  }
  return keys;
}

std::string gguf_shard_path(std::string_view prefix, uint32_t index, uint32_t count) {
  return std::string(prefix) + shard_suffix(index, count);
}

std::string strip_gguf_shard_suffix(std::string_view stem) {
  // Digits ending at `end` (at least five), or npos; returns where they start.
  const auto digits_before = [&](size_t end) -> size_t {
    size_t b = end;
    while (b > 0 && stem[b - 1] >= '0' && stem[b - 1] <= '9') --b;
    return end - b >= 5 ? b : std::string_view::npos;
  };
  constexpr std::string_view kOf = "-of-";
  const size_t count_at = digits_before(stem.size());
  if (count_at == std::string_view::npos || count_at < kOf.size() ||
      stem.substr(count_at - kOf.size(), kOf.size()) != kOf) {
    return std::string(stem);
  }
  const size_t index_at = digits_before(count_at - kOf.size());
  if (index_at == std::string_view::npos || index_at == 0 || stem[index_at - 1] != '-') {
    return std::string(stem);
  }
  return std::string(stem.substr(0, index_at - 1));
}

Status check_not_later_gguf_shard(const GgufFile& file) {
  TANDEM_ASSIGN_OR_RETURN(const GgufSplitKeys keys, read_gguf_split_keys(file));
  if (keys.index == 0) return Status();
  const std::optional<std::string> prefix = shard_prefix(file.name(), keys.index, keys.count);
  return invalid_argument_error(
      file.name() + " is " + shard_words(keys.index, keys.count) +
      " of a split GGUF model (split.no " + std::to_string(keys.index) + "); open the first shard" +
      (prefix ? ", " + gguf_shard_path(*prefix, 0, keys.count) : std::string()) +
      ", which holds the model's metadata and finds the others");
}

Result<GgufFile> open_gguf_model(const std::string& path, const GgufLimits& limits) {
  TANDEM_ASSIGN_OR_RETURN(GgufFile first, GgufFile::open(path, limits));
  TANDEM_RETURN_IF_ERROR(check_not_later_gguf_shard(first));
  TANDEM_ASSIGN_OR_RETURN(const GgufSplitKeys keys, read_gguf_split_keys(first));
  if (keys.count == 1) return first;
  const std::optional<std::string> prefix = shard_prefix(path, 0, keys.count);
  if (!prefix) {
    return invalid_argument_error(
        path + " is the first of " + std::to_string(keys.count) +
        " shards (split.count), but its name does not end in " + shard_suffix(0, keys.count) +
        ", so the other shards cannot be found; keep the names the shards were written with");
  }
  if (!keys.tensors) {
    return invalid_argument_error(path + ": the first of " + std::to_string(keys.count) +
                                  " shards has no key 'split.tensors.count'");
  }
  for (uint32_t i = 1; i < keys.count; ++i) {
    const std::string shard_path = gguf_shard_path(*prefix, i, keys.count);
    Result<GgufFile> shard = GgufFile::open(shard_path, limits);
    if (!shard.ok()) {
      return shard.status().with_prefix(path + ": " + shard_words(i, keys.count));
    }
    TANDEM_ASSIGN_OR_RETURN(const GgufSplitKeys own, read_gguf_split_keys(*shard));
    if (!shard->contains(kSplitCount) || own.index != i || own.count != keys.count ||
        own.tensors != keys.tensors) {
      return invalid_argument_error(
          shard_path + " does not belong with " + path + ": as " + shard_words(i, keys.count) +
          " of " + std::to_string(*keys.tensors) + " tensors it needs split.no " +
          std::to_string(i) + ", split.count " + std::to_string(keys.count) +
          " and split.tensors.count " + std::to_string(*keys.tensors) + "; it has " +
          (shard->contains(kSplitCount)
               ? "split.no " + std::to_string(own.index) + ", split.count " +
                     std::to_string(own.count) + " and split.tensors.count " +
                     (own.tensors ? std::to_string(*own.tensors) : std::string("(none)"))
               : std::string("no split keys")));
    }
    TANDEM_RETURN_IF_ERROR(first.adopt_shard(std::move(shard).value()));
  }
  if (first.tensors().size() != *keys.tensors) {
    return invalid_argument_error(path + ": split.tensors.count is " +
                                  std::to_string(*keys.tensors) + " but the " +
                                  std::to_string(keys.count) + " shards hold " +
                                  std::to_string(first.tensors().size()) + " tensors");
  }
  return first;
}

}  // namespace tandem::model
