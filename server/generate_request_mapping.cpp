// GenerateRequest -> engine Request, and engine token events -> GenerateResponse.
#include "server/generate_request_mapping.h"

#include <limits>
#include <string>
#include <utility>

#include "base/status.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::server {
namespace {

namespace wire = vllm::grpc::engine;

Status unsupported(const std::string& what) {
  return invalid_argument_error(what + " is not supported by Tandem");
}

Result<std::vector<int32_t>> prompt_ids(const wire::GenerateRequest& request,
                                        const GenerateMappingLimits& limits,
                                        const tokenizer::Tokenizer* tokenizer) {
  std::vector<int32_t> ids;
  switch (request.input_case()) {
    case wire::GenerateRequest::kTokenized: {
      const auto& input = request.tokenized().input_ids();
      if (static_cast<size_t>(input.size()) > limits.max_prompt_tokens) {
        return invalid_argument_error("tokenized.input_ids has " + std::to_string(input.size()) +
                                      " tokens; the limit is " +
                                      std::to_string(limits.max_prompt_tokens));
      }
      ids.reserve(static_cast<size_t>(input.size()));
      for (const uint32_t id : input) {
        if (id > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
          return invalid_argument_error("tokenized.input_ids: token id " + std::to_string(id) +
                                        " is out of range");
        }
        ids.push_back(static_cast<int32_t>(id));
      }
      break;
    }
    case wire::GenerateRequest::kText: {
      if (tokenizer == nullptr) {
        return invalid_argument_error(
            "text input needs the model's tokenizer, which this server has not loaded; send "
            "tokenized.input_ids");
      }
      if (request.text().size() > limits.max_text_bytes) {
        return invalid_argument_error("text is " + std::to_string(request.text().size()) +
                                      " bytes; the limit is " +
                                      std::to_string(limits.max_text_bytes));
      }
      TANDEM_ASSIGN_OR_RETURN(
          ids, tokenizer->encode(request.text(), tokenizer::EncodeOptions{.add_special = true,
                                                                          .parse_special = true}));
      break;
    }
    case wire::GenerateRequest::INPUT_NOT_SET:
      return invalid_argument_error("the request has no input: set tokenized or text");
  }
  if (ids.empty()) return invalid_argument_error("the prompt is empty (0 tokens)");
  return ids;
}

Status check_unsupported(const wire::GenerateRequest& request) {
  const wire::SamplingParams& p = request.sampling_params();
  switch (p.constraint_case()) {
    case wire::SamplingParams::kJsonSchema:
      return unsupported("structured output (sampling_params.json_schema)");
    case wire::SamplingParams::kRegex:
      return unsupported("structured output (sampling_params.regex)");
    case wire::SamplingParams::kGrammar:
      return unsupported("structured output (sampling_params.grammar)");
    case wire::SamplingParams::kStructuralTag:
      return unsupported("structured output (sampling_params.structural_tag)");
    case wire::SamplingParams::kJsonObject:
      return unsupported("structured output (sampling_params.json_object)");
    case wire::SamplingParams::kChoice:
      return unsupported("structured output (sampling_params.choice)");
    case wire::SamplingParams::CONSTRAINT_NOT_SET:
      break;
  }
  if (request.has_mm_inputs()) return unsupported("multimodal input (mm_inputs)");
  if (request.has_kv_transfer_params() || request.has_kv_transfer_params_json()) {
    return unsupported("KV transfer (kv_transfer_params)");
  }
  if (request.has_data_parallel_rank() && request.data_parallel_rank() != 0) {
    return invalid_argument_error("data_parallel_rank " +
                                  std::to_string(request.data_parallel_rank()) +
                                  " does not exist; this server has one rank, 0");
  }
  return Status();
}

Result<runtime::SamplingParams> sampling_params(const wire::SamplingParams& p) {
  runtime::SamplingParams s;
  s.temperature = p.has_temperature() ? p.temperature() : 1.0f;
  s.top_p = p.top_p() == 0.0f ? 1.0f : p.top_p();
  s.top_k = static_cast<int64_t>(p.top_k());  // 0: off
  s.min_p = p.min_p();
  s.frequency_penalty = p.frequency_penalty();
  s.presence_penalty = p.presence_penalty();
  s.repetition_penalty = p.repetition_penalty() == 0.0f ? 1.0f : p.repetition_penalty();
  if (p.has_max_tokens()) s.max_tokens = static_cast<int64_t>(p.max_tokens());
  s.min_tokens = static_cast<int64_t>(p.min_tokens());
  s.stop.assign(p.stop().begin(), p.stop().end());
  for (const uint32_t id : p.stop_token_ids()) {
    if (id > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
      return invalid_argument_error("sampling_params.stop_token_ids: token id " +
                                    std::to_string(id) + " is out of range");
    }
    s.stop_token_ids.push_back(static_cast<int32_t>(id));
  }
  s.ignore_eos = p.ignore_eos();
  s.include_stop_str_in_output = p.include_stop_str_in_output();
  if (p.has_seed()) s.seed = static_cast<uint64_t>(static_cast<uint32_t>(p.seed()));
  for (const auto& [id, bias] : p.logit_bias()) s.logit_bias[id] = bias;
  if (p.has_logprobs()) s.logprobs = static_cast<int64_t>(p.logprobs());  // -1 (all) is refused
  if (p.has_prompt_logprobs()) s.prompt_logprobs = static_cast<int64_t>(p.prompt_logprobs());
  return s;
}

Status truncate_prompt(const wire::SamplingParams& p, int64_t context_length,
                       std::vector<int32_t>& ids) {
  if (!p.has_truncate_prompt_tokens()) return Status();
  int64_t keep = p.truncate_prompt_tokens();
  if (keep == -1) {
    keep = context_length - 1;
  } else if (keep <= 0) {
    return invalid_argument_error(
        "sampling_params.truncate_prompt_tokens must be -1 (fit the context) or positive, got " +
        std::to_string(keep));
  }
  if (keep > 0 && static_cast<int64_t>(ids.size()) > keep) {
    ids.erase(ids.begin(), ids.end() - keep);  // keep the last `keep` tokens, as vLLM does
  }
  return Status();
}

}  // namespace

Result<runtime::Request> to_engine_request(const wire::GenerateRequest& wire_request,
                                           const GenerateMappingLimits& limits,
                                           const tokenizer::Tokenizer* tokenizer) {
  if (wire_request.request_id().empty()) {
    return invalid_argument_error("request_id is empty");
  }
  if (wire_request.request_id().size() > limits.max_request_id_bytes) {
    return invalid_argument_error(
        "request_id is " + std::to_string(wire_request.request_id().size()) +
        " bytes; the limit is " + std::to_string(limits.max_request_id_bytes));
  }
  TANDEM_RETURN_IF_ERROR(check_unsupported(wire_request));
  runtime::Request request;
  request.id = wire_request.request_id();
  TANDEM_ASSIGN_OR_RETURN(request.prompt_token_ids, prompt_ids(wire_request, limits, tokenizer));
  const wire::SamplingParams& p = wire_request.sampling_params();
  TANDEM_RETURN_IF_ERROR(truncate_prompt(p, limits.context_length, request.prompt_token_ids));
  TANDEM_ASSIGN_OR_RETURN(request.sampling, sampling_params(p));
  request.n = p.n() == 0 ? 1 : static_cast<int64_t>(p.n());
  return request;
}

namespace {

void fill_logprobs(std::span<const int32_t> ids, std::span<const runtime::TokenLogprobs> logprobs,
                   wire::OutputLogProbs& out) {
  for (size_t i = 0; i < logprobs.size() && i < ids.size(); ++i) {
    out.add_token_logprobs(logprobs[i].logprob);
    out.add_token_ids(static_cast<uint32_t>(ids[i]));
    wire::TopLogProbs* top = out.add_top_logprobs();
    for (size_t k = 0; k < logprobs[i].top_ids.size(); ++k) {
      top->add_values(logprobs[i].top_logprobs[k]);
      top->add_token_ids(static_cast<uint32_t>(logprobs[i].top_ids[k]));
    }
  }
}

}  // namespace

void fill_input_logprobs(std::span<const int32_t> prompt_ids,
                         std::span<const runtime::TokenLogprobs> logprobs,
                         wire::InputLogProbs& out) {
  for (size_t i = 0; i < prompt_ids.size(); ++i) {
    out.add_token_ids(static_cast<uint32_t>(prompt_ids[i]));
    wire::InputTokenLogProb* value = out.add_token_logprobs();
    wire::TopLogProbs* top = out.add_top_logprobs();
    if (i == 0 || i - 1 >= logprobs.size()) continue;  // the first token has none
    const runtime::TokenLogprobs& lp = logprobs[i - 1];
    value->set_value(lp.logprob);
    for (size_t k = 0; k < lp.top_ids.size(); ++k) {
      top->add_values(lp.top_logprobs[k]);
      top->add_token_ids(static_cast<uint32_t>(lp.top_ids[k]));
    }
  }
}

wire::GenerateResponse complete_response(const runtime::TokenEvent& final_event,
                                         const std::vector<int32_t>& output_ids,
                                         std::span<const runtime::TokenLogprobs> logprobs,
                                         int64_t index) {
  wire::GenerateResponse response;
  wire::GenerateComplete* complete = response.mutable_complete();
  for (const int32_t id : output_ids) complete->add_output_ids(static_cast<uint32_t>(id));
  if (!logprobs.empty()) fill_logprobs(output_ids, logprobs, *complete->mutable_output_logprobs());
  complete->set_finish_reason(std::string(runtime::finish_reason_name(final_event.finish_reason)));
  complete->set_prompt_tokens(static_cast<uint32_t>(final_event.usage.prompt_tokens));
  complete->set_completion_tokens(static_cast<uint32_t>(final_event.usage.completion_tokens));
  complete->set_cached_tokens(static_cast<uint32_t>(final_event.usage.cached_tokens));
  complete->set_index(static_cast<uint32_t>(index));
  if (final_event.matched.token_id.has_value()) {
    complete->set_matched_token_id(static_cast<uint32_t>(*final_event.matched.token_id));
  } else if (final_event.matched.stop_string.has_value()) {
    complete->set_matched_stop_str(*final_event.matched.stop_string);
  }
  return response;
}

wire::GenerateResponse chunk_response(const std::vector<int32_t>& new_ids, int64_t prompt_tokens,
                                      int64_t completion_tokens, int64_t cached_tokens,
                                      std::span<const runtime::TokenLogprobs> logprobs,
                                      int64_t index) {
  wire::GenerateResponse response;
  wire::GenerateStreamChunk* chunk = response.mutable_chunk();
  for (const int32_t id : new_ids) chunk->add_token_ids(static_cast<uint32_t>(id));
  if (!logprobs.empty()) fill_logprobs(new_ids, logprobs, *chunk->mutable_output_logprobs());
  chunk->set_prompt_tokens(static_cast<uint32_t>(prompt_tokens));
  chunk->set_completion_tokens(static_cast<uint32_t>(completion_tokens));
  chunk->set_cached_tokens(static_cast<uint32_t>(cached_tokens));
  chunk->set_index(static_cast<uint32_t>(index));
  return response;
}

}  // namespace tandem::server
