// Where DumpActivationStats may write: a client-given path confined to the directory of the
// configured statistics output file (hardening row C18).
#pragma once

#include <string>

#include "base/result.h"

namespace tandem::server {

// Resolves the file a dump request may write. Pure apart from reading the file system (no
// writes); any thread.
//
// - `configured_output` (placement.stats_output_path) empty: FAILED_PRECONDITION — the server
//   has no place for statistics files.
// - The root is the directory of `configured_output` (relative to the working directory when
//   relative), with symlinks resolved; FAILED_PRECONDITION when it does not exist.
// - `requested` empty: the configured file itself (its directory resolved as above).
// - Otherwise `requested` is taken relative to the root when relative (not to the working
//   directory, unlike the proto comment's wording: a client cannot know the server's working
//   directory, and the root is the only place it may write anyway). Its parent directory must
//   exist and, after symlink resolution, be the root or lie inside it; the last component must
//   name a file ("", ".", ".." are not). Outside the root → PERMISSION_DENIED (also for
//   "../x", absolute paths elsewhere and symlinked directories pointing out); a NUL byte, a
//   path over 4096 bytes, a missing parent directory, a last component that is not a file
//   name or an existing directory → INVALID_ARGUMENT. The file itself may be a symlink: the dump
//   replaces the link by rename, it never writes through it.
// Returns the absolute path to write (resolved parent + file name).
Result<std::string> resolve_stats_dump_path(const std::string& configured_output,
                                            const std::string& requested);

// tandemd's start-up check of placement.stats_output_path, so that the statistics are not lost
// at shutdown: OK when `configured_output` is empty (no output) or names a file (existing or not,
// not a directory) in an existing directory this process may create files in (access W_OK|X_OK,
// which also refuses a read-only file system). INVALID_ARGUMENT otherwise, naming the key, the
// path and the reason. Reads the file system only; any thread.
Status check_stats_output_path(const std::string& configured_output);

}  // namespace tandem::server
