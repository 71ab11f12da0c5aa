// The daemon's process-table scan, against real processes: a kernel-like command line is
// found, remembered while its pid lives, forgotten when it exits, and a child that exec's
// into a kernel command line shortly after fork is still found.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kwd/daemon/kernel_processes.hpp"

namespace {

bool found(const std::vector<kwd::daemon::KernelProcess>& all, pid_t pid) {
  return std::any_of(all.begin(), all.end(), [&](const auto& k) { return k.pid == pid; });
}

// A process whose argv names a connection file after `delay_ms` (before: a plain sleep).
pid_t start_kernel_like(const std::string& file, int delay_ms) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::execl("/usr/bin/python3", "python3", "-c", "import time; time.sleep(30)", "-f", file.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

void stop(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace

TEST_CASE("the process scan finds a kernel, remembers it while it lives, forgets it after") {
  kwd::daemon::KernelProcessScanner scanner;
  const pid_t kernel = start_kernel_like("/tmp/kwd-scan-test/kernel-abc.json", 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int i = 0; i < 5; ++i) {
    const auto all = scanner.scan();
    REQUIRE(found(all, kernel));
    const auto it =
        std::find_if(all.begin(), all.end(), [&](const auto& k) { return k.pid == kernel; });
    CHECK(it->connection_file == "/tmp/kwd-scan-test/kernel-abc.json");
    CHECK(it->start_time > 0);
  }
  stop(kernel);
  CHECK_FALSE(found(scanner.scan(), kernel));
}

TEST_CASE("the process scan finds a child that exec's into a kernel after it was first seen") {
  kwd::daemon::KernelProcessScanner scanner;
  const pid_t late = start_kernel_like("/tmp/kwd-scan-test/kernel-late.json", 300);
  // Seen first as the forked copy of this test (no connection file in its argv).
  CHECK_FALSE(found(scanner.scan(), late));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  CHECK(found(scanner.scan(), late));
  stop(late);
}
