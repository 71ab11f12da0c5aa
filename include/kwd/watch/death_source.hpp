#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "kwd/watch/termination.hpp"

namespace kwd::watch {

// What is known of a watched process's end.
struct ProcessEnd {
  // How it ended; nullopt when it is gone but the platform could not say how (a process that
  // is not our child, on a kernel without PIDFD_INFO_EXIT).
  std::optional<Termination> status;
  // How the end was learnt ("waitpid", "pidfd", "kqueue"), or why the status is unknown.
  std::string how_known;
};

// Tells a Watch when its kernel has ended. One per watched process.
class DeathSource {
 public:
  virtual ~DeathSource() = default;
  // Becomes readable when the process may have ended; -1 when the owner of the process says
  // when to look instead (a parent's SIGCHLD).
  [[nodiscard]] virtual int fd() const = 0;
  // Without blocking: the end, once the process has ended and what can be learnt of it has
  // been. nullopt means "not yet": look again after fd() fired or a short while later.
  virtual std::optional<ProcessEnd> check() = 0;
};

// Our own child (launcher mode): reaped with waitpid(WNOHANG) when SIGCHLD says so.
class ChildDeathSource final : public DeathSource {
 public:
  explicit ChildDeathSource(pid_t pid) : pid_(pid) {}
  [[nodiscard]] int fd() const override { return -1; }
  std::optional<ProcessEnd> check() override;
  // Blocks until the child ends (the launcher's last resort when its loop failed).
  ProcessEnd wait();

 private:
  pid_t pid_;
  std::optional<ProcessEnd> ended_;
};

// A process that is not our child (daemon mode): pidfd on Linux, kqueue on macOS; one
// implementation per platform folder. Throws std::system_error when the process is gone or
// cannot be watched.
std::unique_ptr<DeathSource> make_process_death_source(pid_t pid);

}  // namespace kwd::watch
