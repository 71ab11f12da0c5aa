// The daemon's process-table scan, against real processes: a kernel-like command line is
// found scan after scan while its pid lives, forgotten when it exits, and a process that
// exec's into a kernel command line after the scan has judged it is still found.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "kwd/daemon/kernel_processes.hpp"

namespace {

bool found(const kwd::daemon::KernelProcessScanner::Found& all, pid_t pid) {
  return std::any_of(all.begin(), all.end(), [&](const auto* k) { return k->pid == pid; });
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

// A child that waits until `release` is called, then exec's into a kernel-like command line
// naming `file`: a process judged before its exec.
struct WaitingChild {
  pid_t pid = -1;
  int go = -1;
  void release() {
    REQUIRE(::write(go, "x", 1) == 1);
    ::close(go);
  }
};

WaitingChild start_waiting_child(const char* file) {
  int go[2];
  REQUIRE(::pipe(go) == 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(go[1]);
    char byte;
    if (::read(go[0], &byte, 1) != 1) ::_exit(1);
    ::execl("/usr/bin/python3", "python3", "-c", "import time; time.sleep(30)", "-f", file,
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(go[0]);
  return {pid, go[1]};
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
        std::find_if(all.begin(), all.end(), [&](const auto* k) { return k->pid == kernel; });
    CHECK((*it)->connection_file == "/tmp/kwd-scan-test/kernel-abc.json");
    CHECK((*it)->start_time > 0);
  }
  stop(kernel);
  CHECK_FALSE(found(scanner.scan(), kernel));
}

TEST_CASE("the process scan finds a process that exec's into a kernel long after it was seen") {
  // As a kernelspec's `bash -c "source activate env && exec python ... -f FILE"` does: the pid
  // is seen (and judged no kernel) several scans before it exec's. The child waits on a pipe.
  auto child = start_waiting_child("/tmp/kwd-scan-test/kernel-late.json");
  const pid_t late = child.pid;
  kwd::daemon::KernelProcessScanner scanner;
  for (int i = 0; i < 6; ++i)
    CHECK_FALSE(found(scanner.scan(), late));
  // Past the time a new pid is looked at in every scan: only the regular rechecks find it.
  std::this_thread::sleep_for(std::chrono::milliseconds(5100));
  CHECK_FALSE(found(scanner.scan(), late));
  child.release();
  // Until the exec is done (its command line is python's).
  for (int i = 0; i < 200; ++i) {
    std::ifstream cmdline("/proc/" + std::to_string(late) + "/cmdline");
    std::string text((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    if (text.find("kernel-late.json") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (int i = 0; i < 10; ++i)  // quick scans look at new processes only
    CHECK_FALSE(found(scanner.scan(kwd::daemon::KernelProcessScanner::ScanKind::quick), late));
  bool seen = false;
  for (int i = 0; i < 5 && !seen; ++i)
    seen = found(scanner.scan(), late);
  CHECK(seen);
  stop(late);
}

TEST_CASE("a pid announced by its exec is examined at once, and the scans then know it") {
  auto child = start_waiting_child("/tmp/kwd-scan-test/kernel-announced.json");
  const pid_t late = child.pid;
  kwd::daemon::KernelProcessScanner scanner;
  CHECK_FALSE(found(scanner.scan(), late));
  CHECK_FALSE(found(scanner.examine_now({late}), late));  // not a kernel yet
  child.release();
  bool announced = false;
  for (int i = 0; i < 200 && !announced; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const auto now = scanner.examine_now({late});
    announced = found(now, late);
    if (announced)
      CHECK(now.front()->connection_file == "/tmp/kwd-scan-test/kernel-announced.json");
  }
  CHECK(announced);
  CHECK(found(scanner.scan(kwd::daemon::KernelProcessScanner::ScanKind::quick), late));
  stop(late);
  CHECK_FALSE(found(scanner.scan(), late));
}

TEST_CASE("a fork of a kernel (a worker that never exec'd) is not a kernel of its own") {
  int out[2];
  REQUIRE(::pipe(out) == 0);
  const pid_t kernel = ::fork();
  if (kernel == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    ::execl("/usr/bin/python3", "python3", "-c",
            "import os, time\n"
            "worker = os.fork()\n"
            "if worker == 0: time.sleep(30)\n"  // the kernel's argv, a pid of its own
            "print(worker, flush=True); time.sleep(30)",
            "-f", "/tmp/kwd-scan-test/kernel-forks.json", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  // Read up to the worker's pid only: the pipe stays open for the 30 s both of them sleep.
  std::string text;
  char buf[64];
  while (text.find('\n') == std::string::npos) {
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  const pid_t worker = static_cast<pid_t>(std::atoi(text.c_str()));
  REQUIRE(worker > 0);
  kwd::daemon::KernelProcessScanner scanner;
  const auto all = scanner.scan();
  CHECK(found(all, kernel));
  CHECK_FALSE(found(all, worker));
  CHECK_FALSE(found(scanner.examine_now({worker}), worker));
  ::kill(worker, SIGKILL);
  stop(kernel);
}
