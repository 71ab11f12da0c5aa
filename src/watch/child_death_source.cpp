#include <sys/wait.h>

#include <cerrno>

#include "kwd/watch/death_source.hpp"

namespace kwd::watch {
namespace {

std::optional<ProcessEnd> reap(pid_t pid, int options) {
  int status = 0;
  pid_t r;
  do
    r = ::waitpid(pid, &status, options);
  while (r < 0 && errno == EINTR);
  if (r == pid) return ProcessEnd{Termination::from_wait_status(status), "waitpid"};
  if (r < 0 && errno == ECHILD) return ProcessEnd{std::nullopt, "already reaped by someone else"};
  return std::nullopt;
}

}  // namespace

std::optional<ProcessEnd> ChildDeathSource::check() {
  if (!ended_) ended_ = reap(pid_, WNOHANG);
  return ended_;
}

ProcessEnd ChildDeathSource::wait() {
  if (!ended_) ended_ = reap(pid_, 0);
  return ended_.value_or(ProcessEnd{std::nullopt, "waitpid failed"});
}

}  // namespace kwd::watch
