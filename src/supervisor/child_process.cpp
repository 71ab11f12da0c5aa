#include "kwd/supervisor/child_process.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace kwd::supervisor {
namespace {

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings)
    out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// RAII for the posix_spawn attribute objects.
struct SpawnAttributes {
  posix_spawnattr_t attr{};
  posix_spawn_file_actions_t actions{};
  SpawnAttributes() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnAttributes() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
};

}  // namespace

ChildProcess ChildProcess::spawn(const SpawnRequest& request) {
  if (request.argv.empty()) throw SpawnError("no kernel command given", EINVAL);
  SpawnAttributes sa;
  // No POSIX_SPAWN_SETPGROUP / setsid: the kernel stays in our process group on purpose.
  // Handlers we installed do not survive exec, but ignored dispositions (SIGPIPE) would.
  posix_spawnattr_setflags(&sa.attr, POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setsigdefault(&sa.attr, &request.reset_to_default);
  if (request.stderr_fd >= 0) posix_spawn_file_actions_adddup2(&sa.actions, request.stderr_fd, 2);

  auto argv = c_strings(request.argv);
  auto envp = c_strings(request.environment);
  ChildProcess child;
  const int rc =
      posix_spawnp(&child.pid_, argv[0], &sa.actions, &sa.attr, argv.data(), envp.data());
  if (rc != 0) {
    throw SpawnError("cannot start " + request.argv[0] + ": " + std::strerror(rc), rc);
  }
  return child;
}

std::optional<Termination> ChildProcess::try_reap() {
  if (reaped_) return reaped_;
  int status = 0;
  pid_t r;
  do
    r = ::waitpid(pid_, &status, WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == pid_) reaped_ = Termination::from_wait_status(status);
  return reaped_;
}

Termination ChildProcess::wait() {
  if (reaped_) return *reaped_;
  int status = 0;
  pid_t r;
  do
    r = ::waitpid(pid_, &status, 0);
  while (r < 0 && errno == EINTR);
  reaped_ = Termination::from_wait_status(status);
  return *reaped_;
}

bool ChildProcess::send_signal(int signal) const {
  if (reaped_) return false;
  return ::kill(pid_, signal) == 0;
}

}  // namespace kwd::supervisor
