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
  // The child leads a process group of its own, with /dev/null for stdin (a background group
  // that read the terminal would be stopped); its signals then go to the whole group.
  bool own_process_group = false;
};

// The kernel, our direct child. Under `run` it stays in our process group: the kernel manager
// signals the group and must reach both of us. Under `smoke` (own_process_group) it leads its
// own, as jupyter_client starts a kernel, so that ending it ends what it started. Reaping is
// the Watch's (watch::ChildDeathSource).
class ChildProcess {
 public:
  static ChildProcess spawn(const SpawnRequest& request);  // throws SpawnError

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  // To the child, or to its whole group when it leads one.
  bool send_signal(int signal) const;
  // SIGKILL to what is left of the child's own group (its children, stopped ones too); nothing
  // when it leads no group. `reaped`: the child itself was waited for. Linux reserves a group's
  // id while any member lives, so a live process with the child's pid after it was reaped
  // means its group is empty and the pid reused: then nothing is sent.
  void kill_group_leftovers(bool reaped) const;

 private:
  pid_t pid_ = -1;
  bool group_leader_ = false;
};

}  // namespace kwd::launch
