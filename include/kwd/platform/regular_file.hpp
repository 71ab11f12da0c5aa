#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "kwd/util/unique_fd.hpp"

namespace kwd::platform {

// A file named from outside (a connection file, a report, a notebook session file) opened
// for reading only if it is a regular file. Its type is checked before anything opens it for
// reading, so a FIFO cannot block the caller and a device's driver never sees an open (some
// act on one: opening /dev/watchdog arms the machine's hardware watchdog).
struct RegularFile {
  util::UniqueFd fd;         // open for reading, non-blocking; invalid when not opened
  struct stat st {};         // the file's, when opened
  bool not_regular = false;  // it exists but is a directory, FIFO, device, socket (or, with
                             // O_NOFOLLOW, a symbolic link)
  int error = 0;  // errno of the open or fstat that failed (ESTALE: the file was replaced
                  // between the look and the open), when neither of the above
};

// `path` relative to `dir_fd` (AT_FDCWD for the working directory). `flags` may add
// O_NOFOLLOW: the last component must not be a symbolic link.
RegularFile open_regular_file(int dir_fd, const char* path, int flags = 0);

#ifdef __linux__
// The file that O_PATH descriptor `handle` names, opened for reading through that descriptor
// (/proc/self/fd) if it is a regular file: whatever is renamed into its place meanwhile is
// never opened. Without /proc, `error` is ENOENT.
RegularFile reopen_regular_file(const util::UniqueFd& handle);
#endif

// The first `max_bytes` of what `fd` reads from here (EINTR retried); nullopt on a read error.
std::optional<std::string> read_up_to(int fd, std::size_t max_bytes);

// The names in the directory open as `dir` ("." and ".." left out), which it takes over.
std::vector<std::string> names_in_directory(util::UniqueFd dir);

}  // namespace kwd::platform
