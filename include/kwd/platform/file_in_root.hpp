#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

namespace kwd::platform {

// A file named by another process (a containerised kernel's connection file: the path in its
// argv is its own file system's), read through that process's root directory
// (/proc/PID/root) the way the process itself would resolve it: every component, symbolic
// links included, is resolved inside that root (openat2 RESOLVE_IN_ROOT, no /proc magic
// links), so a link in the container that points at "/etc/shadow" names the container's,
// never the host's. Only a regular file is opened, and only its first `max_bytes` are read.
// Linux only (openat2); elsewhere it reads nothing and says why.
struct FileInRoot {
  std::optional<std::string> text;       // nullopt: not read (see missing, problem)
  bool missing = false;                  // it does not exist (yet)
  std::string problem;                   // why not, in words, when it exists but was not read
  uid_t owner = static_cast<uid_t>(-1);  // the file's, when it was read
};
FileInRoot read_file_in_root(const std::string& root_dir, const std::string& path,
                             std::size_t max_bytes);

}  // namespace kwd::platform
