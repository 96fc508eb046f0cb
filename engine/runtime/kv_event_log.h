// KvEvent / KvEventLog: what the prefix cache did (blocks stored, removed, everything cleared),
// published in numbered batches for subscribers such as a gateway's cache-aware router.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/runtime/request.h"

namespace tandem::runtime {

// One change of the prefix cache. Blocks are named by a content hash chain (KvPrefixIndex): the
// same tokens from position 0 give the same hashes in every replica of a model.
struct KvEvent {
  enum class Kind { kStored, kRemoved, kCleared };
  Kind kind = Kind::kStored;
  int64_t block_hash = 0;              // kStored, kRemoved
  std::optional<int64_t> parent_hash;  // kStored: the previous block's; none for a first block
  std::vector<TokenId> token_ids;      // kStored: the block's tokens
};

struct KvEventBatch {
  uint64_t sequence_number = 0;  // 1, 2, ... in publishing order
  double timestamp = 0;          // seconds since the Unix epoch
  std::vector<KvEvent> events;
};

// The latest `capacity` batches, for readers that follow at their own pace. Thread-safe: the
// scheduler thread publishes, any thread reads. Listeners run on the publishing (or closing)
// thread after the batch is visible, outside the log's lock; they must be quick and must not add
// or remove listeners.
class KvEventLog {
 public:
  explicit KvEventLog(size_t capacity = 1024);

  // Appends a batch of `events` (none: nothing happens) and wakes the listeners.
  void publish(std::vector<KvEvent> events);
  // Batches numbered above `after`, oldest first, at most `max`. `lost` (optional) is set when
  // batches after `after` were already dropped from the log.
  std::vector<KvEventBatch> since(uint64_t after, size_t max, bool* lost = nullptr) const;
  // The number of the latest batch (0 before the first).
  uint64_t last() const;

  // After close() no batch is published and readers should end; listeners are woken once more.
  void close();
  bool closed() const;

  using Listener = std::function<void()>;
  uint64_t add_listener(Listener listener);
  void remove_listener(uint64_t id);

 private:
  void notify();

  const size_t capacity_;
  mutable std::mutex mu_;
  std::deque<KvEventBatch> batches_;        // guarded by mu_
  uint64_t last_ = 0;                       // guarded by mu_
  bool closed_ = false;                     // guarded by mu_
  std::mutex listeners_mu_;                 // held while listeners run and while the set changes
  std::map<uint64_t, Listener> listeners_;  // guarded by listeners_mu_
  uint64_t next_listener_ = 1;              // guarded by listeners_mu_
};

}  // namespace tandem::runtime
