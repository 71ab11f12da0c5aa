#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "kwd/util/private_files.hpp"
#include "kwd/watch/watch.hpp"

namespace kwd::launch {

// What `run` tells about its kernel while it lives, for readers that are not its kernel
// manager (the JupyterLab extension's status item): one small JSON file, <kernel id>.json in
// watch::live_status_dir() (0700, the file 0600), replaced atomically on every refresh, so
// reading it costs the kernel nothing. Without a kernel id (no connection file) or a usable
// directory there is no file, and the kernel runs as before.
class LiveStatusFile {
 public:
  explicit LiveStatusFile(const std::string& connection_file);
  // Writes the kernel's state and memory now; never throws (a failed write is said once).
  void refresh(const watch::Watch& watch, pid_t kernel_pid);
  // Removes the file (the kernel has ended). Never throws.
  void remove() noexcept;

 private:
  std::optional<util::SafeDir> dir_;
  std::string name_;
  std::string kernel_id_;
  bool failed_ = false;
};

}  // namespace kwd::launch
