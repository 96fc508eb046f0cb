// KvEventsReactor: one VllmEngine.SubscribeKvEvents stream, the engine's prefix-cache events
// (KvEventLog) written as they are published, one KvEventBatch per engine batch.
#pragma once

#include <cstdint>
#include <mutex>

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include "engine/runtime/kv_event_log.h"
#include "server/serving_context.h"

namespace tandem::server {

// Lifetime: created by the service's SubscribeKvEvents handler, deletes itself in OnDone. The
// API key is checked first, then the request parsed. start_sequence_number 0 follows from the
// batches published from now on; N resumes after batch N, replaying what the log still holds
// (FAILED_PRECONDITION when batches after N were already dropped, so the subscriber knows to
// start over). One write in flight at a time; batches published meanwhile wait in the log. The
// stream ends OK when the engine stops (the log closes), CANCELLED when the client goes.
class KvEventsReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  KvEventsReactor(ServingContext& context, grpc::CallbackServerContext* call,
                  const grpc::ByteBuffer& request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void start(grpc::CallbackServerContext* call, const grpc::ByteBuffer& raw);
  // Writes the next batch if one is ready and no write is in flight. Requires mu_.
  void pump_locked();
  void finish_locked(const grpc::Status& status);

  ServingContext& context_;
  runtime::KvEventLog* log_ = nullptr;  // set once subscribed
  uint64_t listener_ = 0;               // set once subscribed

  std::mutex mu_;
  uint64_t sent_ = 0;       // guarded by mu_: the last batch number written
  bool writing_ = false;    // guarded by mu_
  bool finished_ = false;   // guarded by mu_
  grpc::ByteBuffer bytes_;  // guarded by mu_: the write in flight
};

}  // namespace tandem::server
