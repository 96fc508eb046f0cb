// Checkpoint: opens a model in any supported format (GGUF file, HF directory, lone .safetensors),
// builds its ModelSpec and binds its weights, refusing inconsistent models before use.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/model/mapped_file.h"
#include "engine/model/model_spec.h"
#include "engine/model/model_weights.h"
#include "engine/model/tensor_info.h"

namespace tandem::model {

enum class CheckpointFormat { kGguf, kSafetensors };
std::string_view checkpoint_format_name(CheckpointFormat format);  // "gguf", "safetensors"

// Detects the format from the path: a directory is an HF checkpoint; a file starting with the
// bytes "GGUF" is GGUF; a file whose ninth byte opens a JSON header ('{', after the 8-byte
// header length) is safetensors. NOT_FOUND when the path does not exist; INVALID_ARGUMENT naming
// the first bytes for a file that is neither (a damaged magic is not read as a safetensors
// header length).
Result<CheckpointFormat> detect_checkpoint_format(const std::string& path);

// An opened checkpoint. Owns the readers (and so the mappings); `tensors` views their bytes and
// `weights` points into `tensors`, so all stay valid as long as this object lives (moving it
// keeps them valid). A GPT-OSS HF checkpoint's expert tensors are the exception: their layout is
// converted at open (gpt_oss_hf_experts.h), and `tensors` lists the derived copies
// (TensorInfo::derived_from set), which `owner` keeps, in place of the file tensors they were
// made from. Move-only; immutable after open, so any thread may read it.
struct Checkpoint {
  std::string path;
  CheckpointFormat format = CheckpointFormat::kGguf;
  // Metadata as display text, in file order for GGUF (key -> GgufValue::debug_string), and for
  // safetensors the __metadata__ entries and the index metadata.
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<TensorInfo> tensors;
  // Set when the checkpoint describes a model Tandem runs; then `weights` is bound and checked.
  std::optional<ModelSpec> spec;
  std::optional<ModelWeights> weights;
  // Why `spec` is empty (e.g. "architecture llama (dense...) is not supported; ...", "no
  // config.json"); empty when spec is set. Also the raw architecture name when known.
  std::string not_runnable_reason;
  std::string architecture_name;  // as the file names it ("qwen3moe", "Qwen2ForCausalLM", "")

  // The format reader that owns the mappings (and any converted copies).
  std::shared_ptr<const void> owner;
  // The mapped files the tensors view (owned by `owner`), for check_checkpoint_files and
  // load_checkpoint_into_memory.
  std::vector<const MappedFile*> files;
  // The bytes converted at open (ConvertedTensors' OwnedCopy buffers, owned by `owner`), for
  // drop_released_copies.
  std::vector<const OwnedCopy*> converted;
  // The file bytes of the tensors those copies replaced (gone from `tensors`; mapped by `owner`):
  // nothing reads them after open, so they are released (release_copied_spans) there, and again
  // after load_checkpoint_into_memory, whose copy of them drop_released_copies then frees.
  std::vector<std::span<const uint8_t>> replaced_bytes;
};

// OK while every file of `c` is as it was opened (MappedFile::check_unchanged); the first
// DATA_LOSS otherwise. Any thread; one fstat per file.
Status check_checkpoint_files(const Checkpoint& c);

// Reads every file of `c` into memory (MappedFile::load_into_memory), after which changes to the
// files on disk no longer affect it; the copy of c.replaced_bytes is released at once (freed by
// drop_released_copies). Blocking I/O; call before other threads read the weights.
Status load_checkpoint_into_memory(const Checkpoint& c);

// MappedFile::drop_released on every file of `c` and OwnedCopy::drop_released on its converted
// bytes: the bytes dropped in all (0 unless files were read into memory or tensors converted).
uint64_t drop_released_copies(const Checkpoint& c);

// Opens `path`. Errors (the message names the file):
// - malformed files (bad magic, truncated, ...): the reader's error (INVALID_ARGUMENT etc.);
// - a well-formed model of a supported architecture whose hyper-parameters or tensors are
//   inconsistent (missing expert tensors, shapes that do not match, token ids outside the
//   vocabulary, vocab != embedding rows): INVALID_ARGUMENT listing every problem at once.
// A well-formed file that is not a runnable model (unknown architecture, vocab-only GGUF, lone
// .safetensors without config.json) opens successfully with spec empty and not_runnable_reason
// set. Blocking file I/O; call from a setup thread.
Result<Checkpoint> open_checkpoint(const std::string& path);

// open_checkpoint, then FAILED_PRECONDITION/UNIMPLEMENTED with not_runnable_reason when the
// checkpoint is not a model Tandem can run. What the engine calls at startup.
Result<Checkpoint> open_model(const std::string& path);

// Spec + weights for an in-memory tensor list (tests, tools): validate_spec and bind_weights
// with all problems of both in one INVALID_ARGUMENT.
Result<ModelWeights> check_model(const ModelSpec& spec, std::span<const TensorInfo> tensors,
                                 TensorNaming naming);

// Where a checkpoint's bytes go. embeddings = token embedding + lm head (once when tied);
// experts = every routed expert's gate/up/down; dense = all other bound tensors (attention,
// norms, routers, shared experts, dense FFNs, output norm); unused = tensors no role claims.
// For a non-runnable checkpoint only total is meaningful (everything else 0).
struct CheckpointSizes {
  uint64_t total = 0;
  uint64_t experts = 0;
  uint64_t dense = 0;
  uint64_t embeddings = 0;
  uint64_t unused = 0;
  // One expert index's gate+up+down in each layer (0 for dense layers; the largest expert when
  // experts of a layer differ in type), and summed over all layers.
  std::vector<uint64_t> per_expert_per_layer;
  uint64_t per_expert = 0;
};

CheckpointSizes checkpoint_sizes(const Checkpoint& checkpoint);

}  // namespace tandem::model
