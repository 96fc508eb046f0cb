// The VllmEngine wire <-> engine conversion of one Generate call: GenerateRequest -> engine
// Request (with the vLLM worker protocol's defaults), and token events -> GenerateResponse.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/runtime/request.h"
#include "vllm/grpc/engine/vllm_engine.pb.h"

namespace tandem::tokenizer {
class Tokenizer;
}  // namespace tandem::tokenizer

namespace tandem::server {

// Bounds of the wire request that the mapping itself checks (the engine checks the rest: token
// ids against the vocabulary, sampling values, prompt + max_tokens against the context).
struct GenerateMappingLimits {
  int64_t context_length = 0;          // tokens; truncate_prompt_tokens = -1 keeps this - 1
  size_t max_request_id_bytes = 256;   // hardening row B8
  size_t max_text_bytes = 1 << 20;     // `text` input (B11): 1 MiB
  size_t max_prompt_tokens = 1 << 20;  // before the context check, bounds the copy
};

// Converts `wire` into an engine Request. Applies the protocol's defaults (temperature unset ->
// 1, top_p 0 -> 1, top_k 0 -> off, repetition_penalty 0 -> 1, n 0 -> 1, max_tokens unset -> up
// to the context). `text` input is tokenized with `tokenizer` (BOS as the vocabulary asks,
// special tokens written in the text matched); without a tokenizer it is INVALID_ARGUMENT.
// INVALID_ARGUMENT naming the field for what Tandem does not do rather than ignoring it silently:
// logprobs, prompt_logprobs, structured-output constraints, multimodal inputs, KV transfer, a
// data-parallel rank other than 0; and for an empty or over-long request id, a missing or empty
// prompt, out-of-range ids. Any thread.
Result<runtime::Request> to_engine_request(const vllm::grpc::engine::GenerateRequest& wire,
                                           const GenerateMappingLimits& limits,
                                           const tokenizer::Tokenizer* tokenizer);

// The `complete` message for a final event: finish_reason "stop" / "length" / "abort", all
// output ids, usage counts and the matched stop; output_logprobs for `logprobs` (one per output
// id; empty: none, as in a stream, whose chunks carried them). Only for kStop, kLength and kAbort
// (deadline and error finish the call with a gRPC status instead). `index`: which of the n samples.
vllm::grpc::engine::GenerateResponse complete_response(
    const runtime::TokenEvent& final_event, const std::vector<int32_t>& output_ids,
    std::span<const runtime::TokenLogprobs> logprobs = {}, int64_t index = 0);

// The prompt's `input_logprobs`: every prompt id, the first without a value; `logprobs` holds one
// entry per prompt token after the first (TokenEvent::prompt_logprobs).
void fill_input_logprobs(std::span<const int32_t> prompt_ids,
                         std::span<const runtime::TokenLogprobs> logprobs,
                         vllm::grpc::engine::InputLogProbs& out);

// A `chunk` message of sample `index`: the new ids since its last chunk, with its cumulative usage
// so far, and their output_logprobs when `logprobs` (one per new id) is not empty.
vllm::grpc::engine::GenerateResponse chunk_response(
    const std::vector<int32_t>& new_ids, int64_t prompt_tokens, int64_t completion_tokens,
    int64_t cached_tokens, std::span<const runtime::TokenLogprobs> logprobs = {},
    int64_t index = 0);

}  // namespace tandem::server
