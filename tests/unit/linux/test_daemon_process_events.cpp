// The process-events connector as the daemon reads it, against real processes: a child's exec
// is announced by its pid, a fork that never exec's is not, and the kernel itself drops every
// other kind of event before it reaches the daemon (a socket filter).
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>

#include "kwd/daemon/process_events.hpp"
#include "kwd/util/clock.hpp"

namespace {

// Drains until `pid` is among the execs or `wait` has passed; whether it was, and when it
// exec'd by the event's own stamp (steady ns) in *exec_at.
bool announced(kwd::daemon::ProcessEvents& events, pid_t pid, std::chrono::milliseconds wait,
               std::int64_t* exec_at = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd ready{events.fd(), POLLIN, 0};
    if (::poll(&ready, 1, 50) <= 0) continue;
    const auto batch = events.drain();
    REQUIRE(batch.exec_at_ns.size() == batch.exec.size());
    const auto it = std::find(batch.exec.begin(), batch.exec.end(), pid);
    if (it == batch.exec.end()) continue;
    if (exec_at) *exec_at = batch.exec_at_ns[static_cast<std::size_t>(it - batch.exec.begin())];
    return true;
  }
  return false;
}

}  // namespace

TEST_CASE("process events announce a child's exec and not a fork that never exec'd") {
  auto events = kwd::daemon::make_process_events();
  if (events->fd() < 0) {
    WARN("no process events here (before Linux 6.6 they need CAP_NET_ADMIN): nothing to test");
    return;
  }
  // Only execs and subscription answers get through: the filter is in the kernel.
  socklen_t instructions = 0;
  REQUIRE(::getsockopt(events->fd(), SOL_SOCKET, SO_GET_FILTER, nullptr, &instructions) == 0);
  CHECK(instructions == 5);

  const pid_t forked = ::fork();
  if (forked == 0) ::_exit(0);
  const std::int64_t before = kwd::util::steady_ns();
  const pid_t execed = ::fork();
  if (execed == 0) {
    ::execl("/bin/true", "true", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::int64_t exec_at = 0;
  CHECK(announced(*events, execed, std::chrono::seconds(10), &exec_at));
  // Stamped by the kernel on the clock the daemon reads: between the fork and now.
  CHECK(exec_at >= before);
  CHECK(exec_at <= kwd::util::steady_ns());
  CHECK_FALSE(announced(*events, forked, std::chrono::milliseconds(200)));
  ::waitpid(forked, nullptr, 0);
  ::waitpid(execed, nullptr, 0);
}
