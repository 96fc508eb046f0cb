// KvEventsReactor: SubscribeKvEvents, the engine's KvEventLog as a stream of KvEventBatch.
#include "server/kv_events_reactor.h"

#include <string>

#include "server/api_key_auth.h"
#include "server/wire_message.h"
#include "smg/grpc/common/common.pb.h"

namespace tandem::server {
namespace {

namespace common = smg::grpc::common;

void fill_batch(const runtime::KvEventBatch& in, common::KvEventBatch& out) {
  out.set_sequence_number(in.sequence_number);
  out.set_timestamp(in.timestamp);
  out.set_dp_rank(0);
  uint64_t event_id = in.sequence_number << 20;
  for (const runtime::KvEvent& e : in.events) {
    common::KvCacheEvent* event = out.add_events();
    event->set_event_id(event_id++);
    switch (e.kind) {
      case runtime::KvEvent::Kind::kStored: {
        common::KvBlocksStored* stored = event->mutable_stored();
        if (e.parent_hash.has_value()) stored->set_parent_block_hash(*e.parent_hash);
        common::KvBlock* block = stored->add_blocks();
        block->set_block_hash(e.block_hash);
        for (const runtime::TokenId t : e.token_ids) {
          block->add_token_ids(static_cast<uint32_t>(t));
        }
        block->set_block_size(static_cast<int32_t>(e.token_ids.size()));
        break;
      }
      case runtime::KvEvent::Kind::kRemoved:
        event->mutable_removed()->add_block_hashes(e.block_hash);
        break;
      case runtime::KvEvent::Kind::kCleared:
        event->mutable_cleared();
        break;
    }
  }
}

}  // namespace

KvEventsReactor::KvEventsReactor(ServingContext& context, grpc::CallbackServerContext* call,
                                 const grpc::ByteBuffer& raw)
    : context_(context) {
  start(call, raw);
}

void KvEventsReactor::start(grpc::CallbackServerContext* call, const grpc::ByteBuffer& raw) {
  std::unique_lock<std::mutex> lock(mu_);
  const grpc::Status auth = check_api_key(context_.auth, *call);
  if (!auth.ok()) return finish_locked(auth);
  common::SubscribeKvEventsRequest request;
  const grpc::Status parsed = parse_wire_message(raw, request);
  if (!parsed.ok()) return finish_locked(parsed);
  engine::Engine* engine = context_.engine();
  if (engine == nullptr) {
    return finish_locked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                      "the model is still loading; retry when HealthCheck passes"));
  }
  if (!engine->prefix_caching()) {
    return finish_locked(grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        "the prefix cache is off (runtime.prefix_caching, or a model with sliding-window "
        "layers): there are no KV events"));
  }
  runtime::KvEventLog& log = engine->kv_events();
  const uint64_t start = request.start_sequence_number();
  if (start == 0) {
    sent_ = log.last();
  } else {
    bool lost = false;
    log.since(start, 1, &lost);
    if (lost || start > log.last()) {
      return finish_locked(grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          "batch " + std::to_string(start) + " is not in the event log (it holds up to batch " +
              std::to_string(log.last()) + "); subscribe again with start_sequence_number 0"));
    }
    sent_ = start;
  }
  log_ = &log;
  lock.unlock();
  // Lock order: the log's listener lock, then mu_ (never the other way round).
  listener_ = log.add_listener([this] {
    std::lock_guard<std::mutex> guard(mu_);
    pump_locked();
  });
  lock.lock();
  pump_locked();
}

void KvEventsReactor::pump_locked() {
  if (finished_ || writing_) return;
  const std::vector<runtime::KvEventBatch> next = log_->since(sent_, 1);
  if (next.empty()) {
    if (log_->closed()) finish_locked(grpc::Status::OK);
    return;
  }
  common::KvEventBatch batch;
  fill_batch(next.front(), batch);
  const grpc::Status serialized = serialize_wire_message(batch, &bytes_);
  if (!serialized.ok()) return finish_locked(serialized);
  sent_ = next.front().sequence_number;
  writing_ = true;
  StartWrite(&bytes_);
}

void KvEventsReactor::finish_locked(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  Finish(status);
}

void KvEventsReactor::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  writing_ = false;
  if (!ok) return finish_locked(grpc::Status(grpc::StatusCode::CANCELLED, "the stream closed"));
  pump_locked();
}

void KvEventsReactor::OnCancel() {
  std::lock_guard<std::mutex> lock(mu_);
  finish_locked(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
}

void KvEventsReactor::OnDone() {
  // After the listener is removed no engine callback runs, so the reactor can go.
  if (log_ != nullptr) log_->remove_listener(listener_);
  delete this;
}

}  // namespace tandem::server
