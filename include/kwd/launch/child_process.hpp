#pragma once

#include <signal.h>
#include <sys/types.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace kwd::launch {

struct SpawnError : std::runtime_error {
  SpawnError(const std::string& what, int err) : std::runtime_error(what), error(err) {}
  int error;  // errno of the failed exec
};

struct SpawnRequest {
  std::vector<std::string> argv;         // argv[0] is searched on PATH
  std::vector<std::string> environment;  // "NAME=value"
  int stderr_fd = -1;                    // dup2'ed onto the child's fd 2 when >= 0
  int stdout_fd = -1;                    // dup2'ed onto the child's fd 1 when >= 0
  std::string working_dir;               // empty: ours
  std::vector<int> inherited_fds;        // kept open in the child, at the same numbers
  sigset_t reset_to_default{};           // dispositions restored to SIG_DFL in the child
};

// The kernel, our direct child. It stays in our process group: the kernel manager signals
// the group and must reach both of us. Reaping is the Watch's (watch::ChildDeathSource).
class ChildProcess {
 public:
  static ChildProcess spawn(const SpawnRequest& request);  // throws SpawnError

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  bool send_signal(int signal) const;

 private:
  pid_t pid_ = -1;
};

}  // namespace kwd::launch
