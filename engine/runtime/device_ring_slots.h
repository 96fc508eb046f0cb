// DeviceRingSlots: the numbered per-sequence rings a device dense executor keeps for a model's
// sliding-window layers, handed out to sequences' WindowedKvCaches for as long as they live.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace tandem::runtime {

class DeviceRingSlots;

// One slot held by one sequence's cache; returned when the lease is destroyed.
class DeviceRingLease {
 public:
  DeviceRingLease(std::shared_ptr<DeviceRingSlots> slots, int32_t slot)
      : slots_(std::move(slots)), slot_(slot) {}
  ~DeviceRingLease();
  DeviceRingLease(const DeviceRingLease&) = delete;
  DeviceRingLease& operator=(const DeviceRingLease&) = delete;
  int32_t slot() const { return slot_; }

 private:
  std::shared_ptr<DeviceRingSlots> slots_;
  int32_t slot_;
};

// Slots 0 .. n - 1, lowest free first. Any thread.
class DeviceRingSlots : public std::enable_shared_from_this<DeviceRingSlots> {
 public:
  explicit DeviceRingSlots(size_t n) : free_(n, true) {}
  size_t size() const { return free_.size(); }
  // A free slot's lease, or null when every slot is held.
  std::unique_ptr<DeviceRingLease> acquire();

 private:
  friend class DeviceRingLease;
  void release(int32_t slot);

  std::mutex mu_;
  std::vector<bool> free_;
};

inline std::unique_ptr<DeviceRingLease> DeviceRingSlots::acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < free_.size(); ++i) {
    if (free_[i]) {
      free_[i] = false;
      return std::make_unique<DeviceRingLease>(shared_from_this(), static_cast<int32_t>(i));
    }
  }
  return nullptr;
}

inline void DeviceRingSlots::release(int32_t slot) {
  std::lock_guard<std::mutex> lock(mu_);
  free_[static_cast<size_t>(slot)] = true;
}

inline DeviceRingLease::~DeviceRingLease() {
  slots_->release(slot_);
}

}  // namespace tandem::runtime
