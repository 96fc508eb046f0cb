// The configuration field table and the generic per-field parse / format operations over it.
#include "config/config_fields.h"

#include <cctype>
#include <limits>
#include <type_traits>

#include "base/check.h"
#include "config/value_text.h"

namespace tandem::config {

namespace {

// The location of (config.*kSection).*kMember, as a FieldRef.
template <auto kSection, auto kMember>
FieldRef member_ref(Config& config) {
  return &((config.*kSection).*kMember);
}

constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kPiB = int64_t{1} << 50;
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kMaxTokens = int64_t{1} << 24;

constexpr SectionDescriptor kSections[] = {
    {"server", "The gRPC listener, its security, and admission limits."},
    {"metrics", "The Prometheus metrics listener, separate from the API listener."},
    {"model", "The checkpoint to serve."},
    {"placement",
     "Which experts get a copy on the GPU. Every expert stays resident in CPU memory; the GPU "
     "holds copies of the chosen set (see docs/placement.md)."},
    {"runtime", "CPU threads, batching and the KV cache."},
    {"logging", "Process logging (stderr)."},
};

// clang-format off
const FieldDescriptor kFields[] = {
    {.section = "server", .name = "host",
     .doc = "Address the gRPC API listens on. The default accepts loopback connections only; use "
            "\"0.0.0.0\" or \"::\" to listen on every interface (then set api_keys and TLS).",
     .non_empty = true,
     .ref = &member_ref<&Config::server, &ServerConfig::host>},
    {.section = "server", .name = "port",
     .doc = "TCP port of the gRPC API.",
     .min_value = 1, .max_value = 65535,
     .ref = &member_ref<&Config::server, &ServerConfig::port>},
    {.section = "server", .name = "tls_cert_file",
     .doc = "PEM certificate chain for TLS. Empty = plaintext. Needs tls_key_file.",
     .ref = &member_ref<&Config::server, &ServerConfig::tls_cert_file>},
    {.section = "server", .name = "tls_key_file",
     .doc = "PEM private key for tls_cert_file. Empty = plaintext.",
     .ref = &member_ref<&Config::server, &ServerConfig::tls_key_file>},
    {.section = "server", .name = "tls_client_ca_file",
     .doc = "PEM CA bundle; when set, clients must present a certificate signed by it (mutual "
            "TLS). Empty = no client certificates. Needs tls_cert_file.",
     .ref = &member_ref<&Config::server, &ServerConfig::tls_client_ca_file>},
    {.section = "server", .name = "api_keys",
     .doc = "Accepted API keys, sent by clients as `authorization: Bearer <key>` metadata. Empty = "
            "no authentication. Each key must be at least 8 characters. In the environment and on the command line: comma-separated. "
            "Never printed by --print-config.",
     .secret = true,
     .ref = &member_ref<&Config::server, &ServerConfig::api_keys>},
    {.section = "server", .name = "trusted_peers",
     .doc = "Peers whose calls need no API key: IP addresses or CIDR networks (\"127.0.0.1/32\", "
            "\"::1\", \"10.0.0.0/8\"), matched against the connection's address. The SMG "
            "gateway sends no metadata to its gRPC workers, so with api_keys set, list the "
            "gateway's address here (on the same host: 127.0.0.1 and ::1). Needs api_keys. In "
            "the environment and on the command line: comma-separated.",
     .ref = &member_ref<&Config::server, &ServerConfig::trusted_peers>},
    {.section = "server", .name = "max_queued_requests",
     .doc = "Requests that may wait for a slot beyond the max_running_requests that run: once "
            "max_running_requests + max_queued_requests requests are in flight (running or "
            "waiting), new requests fail fast with RESOURCE_EXHAUSTED.",
     .min_value = 1, .max_value = 1000000,
     .ref = &member_ref<&Config::server, &ServerConfig::max_queued_requests>},
    {.section = "server", .name = "max_running_requests",
     .doc = "Requests decoded concurrently (the continuous batch).",
     .min_value = 1, .max_value = 100000,
     .ref = &member_ref<&Config::server, &ServerConfig::max_running_requests>},
    {.section = "server", .name = "shutdown_grace_seconds",
     .doc = "On SIGTERM, how long in-flight requests may drain before they are ended with an "
            "error. 0 = end them at once.",
     .min_value = 0, .max_value = 3600,
     .ref = &member_ref<&Config::server, &ServerConfig::shutdown_grace_seconds>},

    {.section = "metrics", .name = "host",
     .doc = "Address of the Prometheus /metrics listener.",
     .non_empty = true,
     .ref = &member_ref<&Config::metrics, &MetricsConfig::host>},
    {.section = "metrics", .name = "port",
     .doc = "TCP port of the metrics listener. 0 = no metrics listener. Must differ from "
            "server.port.",
     .min_value = 0, .max_value = 65535,
     .ref = &member_ref<&Config::metrics, &MetricsConfig::port>},

    {.section = "model", .name = "path",
     .doc = "The checkpoint: a .gguf file (the first shard of a split GGUF), or a directory with "
            "config.json and *.safetensors. Required to serve.",
     .ref = &member_ref<&Config::model, &ModelConfig::path>},
    {.section = "model", .name = "served_name",
     .doc = "The model id clients ask for. Empty = derived from path (file or directory name "
            "without extension; a split GGUF's without its -00001-of-0000N).",
     .ref = &member_ref<&Config::model, &ModelConfig::served_name>},
    {.section = "model", .name = "tokenizer_dir",
     .doc = "Directory with tokenizer.json, tokenizer_config.json (chat template), config.json "
            "and generation_config.json that the OpenAI gateway reads (GetModelInfo "
            "tokenizer_path). A directory holding tokenizer.json is used as it is. Otherwise, "
            "for a GGUF model, tandemd exports the file's tokenizer into it at startup, replacing "
            "each file by rename (a planted symlink is replaced, not followed). Empty = a new "
            "private directory $TMPDIR/tandemd-tokenizer-<model file stem>-XXXXXX, removed when "
            "tandemd exits; for a Hugging Face checkpoint, empty = the model directory.",
     .ref = &member_ref<&Config::model, &ModelConfig::tokenizer_dir>},
    {.section = "model", .name = "format",
     .doc = "Checkpoint format. auto = by the file's magic / directory contents; gguf or "
            "safetensors must agree with model.path (a mismatch is refused at startup, exit 3).",
     .ref = &member_ref<&Config::model, &ModelConfig::format>},
    {.section = "model", .name = "load_mode",
     .doc = "How the weights are held. mmap = mapped from the file: starts at once and shares "
            "the page cache, but the file must not change while tandemd serves it (a file "
            "truncated or rewritten in place is detected: every request then fails with "
            "DATA_LOSS and health turns NOT_SERVING; replace files by rename instead). read = "
            "read into tandemd's own memory at startup (huge pages where available): slower "
            "to start, immune to the file changing. The read copy's bytes of the experts "
            "that runtime.repack_weights copies are freed layer by layer as they are copied, "
            "and those of the other copied weights and of what the GPU holds once start-up "
            "is done (the start-up log says how much in all), so it settles at about the "
            "model's size, as mmap does, and peaks at about that plus a layer's experts and "
            "the dense copies.",
     .ref = &member_ref<&Config::model, &ModelConfig::load_mode>},
    {.section = "model", .name = "context_length",
     .doc = "Maximum tokens per sequence (prompt + output). 0 = the length the model declares; "
            "a larger value than the model's is refused at startup (exit code 3) with a message "
            "naming both; a model that declares no length takes any value.",
     .min_value = 0, .max_value = kMaxTokens,
     .ref = &member_ref<&Config::model, &ModelConfig::context_length>},

    {.section = "placement", .name = "policy",
     .doc = "frequency = the globally most activated experts (from stats_path; falls back to "
            "uniform with a warning without statistics); uniform = the same number in every "
            "layer; budget = as many of the most frequent experts as fit gpu_memory_budget.",
     .ref = &member_ref<&Config::placement, &PlacementConfig::policy>},
    {.section = "placement", .name = "num_gpu_experts",
     .doc = "Experts copied to the GPU, counted over all MoE layers together (not per layer, "
            "unlike KTransformers' --kt-num-gpu-experts). 0 = every expert on the CPU; more "
            "than the model has = all of them. Also read from TANDEM_NUM_GPU_EXPERTS.",
     .min_value = 0, .max_value = kIntMax,
     .env_alias = "TANDEM_NUM_GPU_EXPERTS",
     .ref = &member_ref<&Config::placement, &PlacementConfig::num_gpu_experts>},
    {.section = "placement", .name = "gpu_memory_budget",
     .doc = "GPU bytes tandemd may use in all (GPU experts, and the dense weights, KV cache and "
            "scratch when runtime.dense_device puts them on the GPU). 0 = the device's free "
            "memory at start, less 2% (at least 256 MiB) of headroom. policy budget fills what "
            "the rest leaves with the most frequent experts; the other policies refuse to start, "
            "naming how many GPU experts would fit, when their experts do not fit.",
     .min_value = 0, .max_value = kPiB,
     .ref = &member_ref<&Config::placement, &PlacementConfig::gpu_memory_budget>},
    {.section = "placement", .name = "stats_path",
     .doc = "Activation statistics recorded by an earlier run, loaded at start. Empty = none. "
            "A file recorded for another model is refused.",
     .ref = &member_ref<&Config::placement, &PlacementConfig::stats_path>},
    {.section = "placement", .name = "stats_output_path",
     .doc = "Where this run writes its activation statistics (merged with stats_path) on "
            "shutdown and on request. Empty = not written. Its directory must exist and be "
            "writable: tandemd checks at startup and refuses to start otherwise (exit code 2).",
     .ref = &member_ref<&Config::placement, &PlacementConfig::stats_output_path>},

    {.section = "runtime", .name = "threads",
     .doc = "CPU worker threads for the CPU experts and kernels. 0 = one per online core.",
     .min_value = 0, .max_value = 4096,
     .ref = &member_ref<&Config::runtime, &RuntimeConfig::threads>},
    {.section = "runtime", .name = "max_batch_tokens",
     .doc = "Most tokens (prefill + decode) in one forward pass.",
     .min_value = 1, .max_value = kMaxTokens,
     .ref = &member_ref<&Config::runtime, &RuntimeConfig::max_batch_tokens>},
    {.section = "runtime", .name = "kv_cache_bytes",
     .doc = "Memory reserved for the KV cache of all running sequences.",
     .min_value = kMiB, .max_value = kPiB,
     .ref = &member_ref<&Config::runtime, &RuntimeConfig::kv_cache_bytes>},
    {.section = "runtime", .name = "prefix_caching",
     .doc = "Keep the KV of full blocks (16 tokens each) after a request ends and reuse it for "
            "later requests that start with the same tokens (a chat's history, a shared "
            "system prompt): their prefill starts after the cached part, reported as "
            "cached_tokens. Cached blocks count as free and are evicted least recently used "
            "first. Off for models with sliding-window layers (gpt-oss), whatever the setting.",
     .ref = &member_ref<&Config::runtime, &RuntimeConfig::prefix_caching>},
    {.section = "runtime", .name = "prefill_chunk_tokens",
     .doc = "Long prompts are prefilled in chunks of this many tokens, so decoding of other "
            "requests continues in between. At most max_batch_tokens.",
     .min_value = 1, .max_value = kMaxTokens,
     .ref = &member_ref<&Config::runtime, &RuntimeConfig::prefill_chunk_tokens>},
    {.section = "runtime", .name = "dense_device",
     .doc = "Where attention, norms, routers, shared experts, the lm head and the KV cache run: "
            "auto = on the GPU when this tandemd was built with CUDA, the device "
            "(runtime.cuda_device) exists and the GPU code runs the model's dense parts (not when a "
            "dense matrix has a type the CUDA kernels do not take, e.g. an i-quant; the start log "
            "names it), else on the CPU; gpu = "
            "on the GPU or refuse to start; cpu = on the CPU (routed experts still follow the "
            "placement). The token embedding always stays in CPU memory.",
     .ref = &member_ref<&Config::runtime, &RuntimeConfig::dense_device>},
    {.section = "runtime", .name = "cuda_device",
     .doc = "The CUDA device (ordinal among those CUDA_VISIBLE_DEVICES leaves visible) that holds "
            "the GPU experts and the dense parts.",
     .min_value = 0, .max_value = 1023,
     .ref = &member_ref<&Config::runtime, &RuntimeConfig::cuda_device>},
    {.section = "runtime", .name = "cpu_kernels",
     .doc = "The CPU matmul kernels: auto = the best this CPU runs (chosen from CPUID), else "
            "scalar, avx2, avx512 (the best AVX-512 variant without AMX) or amx (AVX-512 VNNI "
            "plus the AMX int8 tile kernels for prefill); one the CPU cannot run falls back to "
            "the best below it, with a warning. For comparisons and bug reports. Also read from "
            "TANDEM_CPU_KERNELS.",
     .env_alias = "TANDEM_CPU_KERNELS",
     .ref = &member_ref<&Config::runtime, &RuntimeConfig::cpu_kernels>},
    {.section = "runtime", .name = "repack_weights",
     .doc = "At start, copy the CPU's weights whose type the CPU kernels compute faster in an "
            "8-row interleaved layout into that layout (MXFP4, Q8_0, Q4_K, Q5_K and Q6_K experts "
            "and dense matrices on AVX2 and AVX-512, plus Q4_0, Q5_0 and IQ4_NL on AVX2; AMX "
            "keeps Q5_K and Q6_K rows): the same results, faster. Start-up copies them, then "
            "unmaps the file's pages of what it copied, so resident memory holds those weights "
            "once (the pages stay in the page cache, which the system may reclaim; with "
            "model.load_mode read the read copy's bytes are freed once start-up is done). "
            "Neither the experts placed on the GPU nor, when the dense parts run on the GPU "
            "(runtime.dense_device), the dense matrices are copied. false = compute from the "
            "checkpoint's mapping only.",
     .ref = &member_ref<&Config::runtime, &RuntimeConfig::repack_weights>},
    {.section = "runtime", .name = "numa",
     .doc = "On a machine with several NUMA nodes: pin the CPU worker threads, spread evenly over "
            "the nodes, and interleave the pages of the repacked expert copies over the nodes, "
            "so that every socket's memory serves a share of each expert; the start-up log says "
            "what was done. A single-node machine is left alone either way. The checkpoint's "
            "mapped pages are placed by the system (run under numactl --interleave=all to spread "
            "them too). false = no pinning, pages where first written.",
     .ref = &member_ref<&Config::runtime, &RuntimeConfig::numa>},
    {.section = "runtime", .name = "kv_cache_type",
     .doc = "The element type of the KV cache: f16 keeps the keys and values in half the "
            "memory (as llama.cpp's default cache), so kv_cache_bytes holds twice the tokens and "
            "long contexts decode faster, with each value rounded to the nearest half (logits "
            "move by about 2e-4 on the test models); f32 keeps them exactly. With the dense "
            "parts on the GPU (runtime.dense_device) the KV cache lives there, in this type.",
     .ref = &member_ref<&Config::runtime, &RuntimeConfig::kv_cache_type>},

    {.section = "logging", .name = "level",
     .doc = "Least severe level written. info logs one line per request; nothing per token is "
            "logged above debug.",
     .ref = &member_ref<&Config::logging, &LoggingConfig::level>},
    {.section = "logging", .name = "format",
     .doc = "text = human-readable lines; json = one JSON object per line.",
     .ref = &member_ref<&Config::logging, &LoggingConfig::format>},
};
// clang-format on

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string join_choices(std::span<const std::string_view> names) {
  std::string out;
  for (const std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

template <typename E>
Status set_enum(std::string_view text, E* out) {
  const std::span<const std::string_view> names = enum_names(E{});
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) {
      *out = static_cast<E>(i);
      return Status();
    }
  }
  return invalid_argument_error("'" + std::string(text) +
                                "' is not one of: " + join_choices(names));
}

std::string range_text(const FieldDescriptor& field, bool bytes) {
  const auto fmt = [bytes](int64_t v) {
    return bytes ? format_byte_size(static_cast<uint64_t>(v)) : std::to_string(v);
  };
  return fmt(field.min_value) + ".." + fmt(field.max_value);
}

Status check_range(const FieldDescriptor& field, int64_t value, std::string_view text, bool bytes) {
  if (value < field.min_value || value > field.max_value) {
    return invalid_argument_error(std::string(text) + " is out of range " +
                                  range_text(field, bytes));
  }
  return Status();
}

}  // namespace

std::string FieldDescriptor::key() const {
  return std::string(section) + "." + std::string(name);
}

std::string FieldDescriptor::env_name() const {
  return "TANDEM_" + upper(section) + "_" + upper(name);
}

std::string FieldDescriptor::flag_name() const {
  return "--" + key();
}

std::span<const SectionDescriptor> config_sections() {
  return kSections;
}
std::span<const FieldDescriptor> config_fields() {
  return kFields;
}

const FieldDescriptor* find_field(std::string_view key) {
  for (const FieldDescriptor& f : kFields) {
    if (f.key() == key) return &f;
  }
  return nullptr;
}

size_t field_index(const FieldDescriptor& field) {
  const size_t index = static_cast<size_t>(&field - kFields);
  TANDEM_CHECK(index < std::size(kFields));
  return index;
}

FieldKind field_kind(const FieldDescriptor& field) {
  Config scratch;
  return std::visit(
      [](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) return FieldKind::kString;
        if constexpr (std::is_same_v<T, int>) return FieldKind::kInteger;
        if constexpr (std::is_same_v<T, uint64_t>) return FieldKind::kByteSize;
        if constexpr (std::is_same_v<T, bool>) return FieldKind::kBool;
        if constexpr (std::is_same_v<T, std::vector<std::string>>) return FieldKind::kStringList;
        if constexpr (std::is_enum_v<T>) return FieldKind::kEnum;
      },
      field.ref(scratch));
}

std::span<const std::string_view> field_choices(const FieldDescriptor& field) {
  Config scratch;
  return std::visit(
      [](auto* p) -> std::span<const std::string_view> {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_enum_v<T>) {
          return enum_names(T{});
        } else {
          return {};
        }
      },
      field.ref(scratch));
}

std::string field_type_description(const FieldDescriptor& field) {
  switch (field_kind(field)) {
    case FieldKind::kString:
      return field.non_empty ? "string, not empty" : "string";
    case FieldKind::kInteger:
      return "integer, " + range_text(field, false);
    case FieldKind::kByteSize:
      return "byte size, " + range_text(field, true);
    case FieldKind::kBool:
      return "true or false";
    case FieldKind::kStringList:
      return "list of strings";
    case FieldKind::kEnum:
      return "one of: " + join_choices(field_choices(field));
  }
  return "";
}

Status set_field_from_text(const FieldDescriptor& field, std::string_view text, Config& config) {
  return std::visit(
      [&](auto* p) -> Status {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (field.non_empty && text.empty()) {
            return invalid_argument_error("must not be empty");
          }
          *p = std::string(text);
        } else if constexpr (std::is_same_v<T, int>) {
          TANDEM_ASSIGN_OR_RETURN(const int64_t value, parse_integer(text));
          TANDEM_RETURN_IF_ERROR(check_range(field, value, text, false));
          *p = static_cast<int>(value);
        } else if constexpr (std::is_same_v<T, uint64_t>) {
          TANDEM_ASSIGN_OR_RETURN(const uint64_t value, parse_byte_size(text));
          if (value > static_cast<uint64_t>(field.max_value)) {
            return invalid_argument_error(std::string(text) + " is out of range " +
                                          range_text(field, true));
          }
          TANDEM_RETURN_IF_ERROR(check_range(field, static_cast<int64_t>(value), text, true));
          *p = value;
        } else if constexpr (std::is_same_v<T, bool>) {
          if (text != "true" && text != "false") {
            return invalid_argument_error("'" + std::string(text) + "' is not true or false");
          }
          *p = text == "true";
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          *p = split_list(text);
        } else {
          return set_enum(text, p);
        }
        return Status();
      },
      field.ref(config));
}

void set_field_list(const FieldDescriptor& field, std::vector<std::string> items, Config& config) {
  FieldRef ref = field.ref(config);
  auto* const* list = std::get_if<std::vector<std::string>*>(&ref);
  TANDEM_CHECK(list != nullptr);
  **list = std::move(items);
}

std::string format_field_value(const FieldDescriptor& field, const Config& config) {
  // The reference is only read through; the table's accessors take a mutable Config.
  Config& readable = const_cast<Config&>(config);
  return std::visit(
      [&](auto* p) -> std::string {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return quote_string(*p);
        } else if constexpr (std::is_same_v<T, int>) {
          return std::to_string(*p);
        } else if constexpr (std::is_same_v<T, uint64_t>) {
          return format_byte_size(*p);
        } else if constexpr (std::is_same_v<T, bool>) {
          return std::string(*p ? "true" : "false");
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string out = "[";
          for (const std::string& item : *p) {
            if (out.size() > 1) out += ", ";
            out += field.secret ? std::string("\"<redacted>\"") : quote_string(item);
          }
          return out + "]";
        } else {
          return std::string(enum_name(*p));
        }
      },
      field.ref(readable));
}

std::string suggest_key(std::string_view unknown_key) {
  // The right name in the wrong section ("placement.threads") is the likeliest mistake.
  const size_t dot = unknown_key.rfind('.');
  const std::string_view name =
      dot == std::string_view::npos ? unknown_key : unknown_key.substr(dot + 1);
  for (const FieldDescriptor& f : kFields) {
    if (f.name == name) return f.key();
  }
  std::vector<std::string> keys;
  for (const FieldDescriptor& f : kFields) keys.push_back(f.key());
  return nearest_spelling(unknown_key, keys);
}

std::string suggest_section(std::string_view unknown_section) {
  std::vector<std::string> names;
  for (const SectionDescriptor& s : kSections) names.emplace_back(s.name);
  return nearest_spelling(unknown_section, names);
}

}  // namespace tandem::config
