// SIGBUS from a file mapping whose file shrank underneath it (`truncate` of a served model):
// instead of killing the process, the guarded mapping is replaced by zero pages and marked
// faulted, so the read that faulted returns zeros, the forward pass finishes with garbage, and
// the checkpoint check after it (check_checkpoint_files) discards the step and stops serving with
// a clear error. A SIGBUS outside every guarded range keeps its default action (a crash dump).
#pragma once

#include <cstddef>

namespace tandem::model {

// Guards [data, data + size) until unguard_mapping(slot); installs the process's SIGBUS handler
// on first use (the previous handler is chained for faults outside the ranges). Returns the slot,
// or -1 when all slots are taken (the mapping is then unguarded: a truncation crashes as before).
// Any thread.
int guard_mapping(const void* data, size_t size);
void unguard_mapping(int slot);
// Whether a SIGBUS hit the slot's range since guard_mapping. Any thread; slot -1 gives false.
bool mapping_faulted(int slot);
// Whether [data, data + size) lies inside one guarded range that has not faulted: bytes still
// mapped from their file (MappedFile guards exactly those). Any thread.
bool in_guarded_mapping(const void* data, size_t size);

}  // namespace tandem::model
