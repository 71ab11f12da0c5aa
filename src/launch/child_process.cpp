#include "kwd/launch/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace kwd::launch {
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
  // Handlers we installed do not survive exec, but ignored dispositions (SIGPIPE) would.
  short flags = POSIX_SPAWN_SETSIGDEF;
  if (request.own_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&sa.attr, 0);
    posix_spawn_file_actions_addopen(&sa.actions, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawnattr_setflags(&sa.attr, flags);
  posix_spawnattr_setsigdefault(&sa.attr, &request.reset_to_default);
  if (request.stderr_fd >= 0) posix_spawn_file_actions_adddup2(&sa.actions, request.stderr_fd, 2);
  if (request.stdout_fd >= 0) posix_spawn_file_actions_adddup2(&sa.actions, request.stdout_fd, 1);
  // dup2 onto itself clears FD_CLOEXEC in the child only (POSIX 2024; glibc >= 2.29).
  for (int fd : request.inherited_fds)
    posix_spawn_file_actions_adddup2(&sa.actions, fd, fd);
  if (!request.working_dir.empty())
    posix_spawn_file_actions_addchdir_np(&sa.actions, request.working_dir.c_str());

  auto argv = c_strings(request.argv);
  auto envp = c_strings(request.environment);
  ChildProcess child;
  const int rc =
      posix_spawnp(&child.pid_, argv[0], &sa.actions, &sa.attr, argv.data(), envp.data());
  if (rc != 0) {
    throw SpawnError("cannot start " + request.argv[0] + ": " + std::strerror(rc), rc);
  }
  child.group_leader_ = request.own_process_group;
  return child;
}

bool ChildProcess::send_signal(int signal) const {
  return ::kill(group_leader_ ? -pid_ : pid_, signal) == 0;
}

void ChildProcess::kill_group_leftovers(bool reaped) const {
  if (!group_leader_ || pid_ <= 0) return;
  if (reaped && ::kill(pid_, 0) == 0) return;
  ::kill(-pid_, SIGKILL);
}

}  // namespace kwd::launch
