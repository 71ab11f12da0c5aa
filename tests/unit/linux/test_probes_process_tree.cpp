#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "kwd/platform/linux/procfs.hpp"
#include "kwd/probes/linux/process_tree_probe.hpp"
#include "kwd/probes/linux/recent_processes.hpp"
#include "kwd/util/clock.hpp"

using namespace kwd::probes;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kHeld = 48u << 20;

// A real little tree: a child that forks a grandchild holding 48 MiB of touched memory.
// The pipe says when the grandchild has touched it.
struct ForkedTree {
  pid_t child = -1;
  pid_t grandchild = -1;

  ForkedTree() {
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      const pid_t g = ::fork();
      if (g == 0) {
        void* p =
            ::mmap(nullptr, kHeld, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        std::memset(p, 1, kHeld);
        const pid_t me = ::getpid();
        (void)!::write(ready[1], &me, sizeof me);
        for (;;)
          ::pause();
      }
      for (;;)
        ::pause();
    }
    ::close(ready[1]);
    REQUIRE(::read(ready[0], &grandchild, sizeof grandchild) == sizeof grandchild);
    ::close(ready[0]);
  }
  ~ForkedTree() {
    // Never kill(-1, ...): that would signal every process we may signal.
    if (grandchild > 0) ::kill(grandchild, SIGKILL);
    if (child > 0) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
    }
  }
};

kwd::timeline::MemorySample sample_now(Probe& p) {
  kwd::timeline::MemorySample s;
  s.t_ms = kwd::util::wall_ms();
  p.sample(s);
  return s;
}

}  // namespace

TEST_CASE("the process tree counts every descendant's memory") {
  ForkedTree tree;
  ProbeOptions options;
  options.kernel_pid = tree.child;
  options.processes = std::make_shared<KernelProcesses>(tree.child);
  options.tree_rescan_interval = 0ms;
  linux_proc::ProcessTreeProbe probe(options);
  REQUIRE(probe.status().available);

  const auto s = sample_now(probe);
  const auto members = probe.members();
  CHECK(members.size() == 2);
  CHECK(std::find(members.begin(), members.end(), tree.grandchild) != members.end());
  CHECK(options.processes->is_member(tree.grandchild));
  CHECK(s.processes == 2);
  CHECK(s.threads == 2);
  CHECK(s.rss >= static_cast<std::int64_t>(kHeld));
  CHECK(s.pss >= static_cast<std::int64_t>(kHeld));  // the first sample reads PSS too
  CHECK(s.swap == 0);

  nlohmann::json report;
  probe.contribute(report);
  CHECK(report["process_tree"]["root_pid"] == tree.child);
  CHECK(report["process_tree"]["members"].size() == 2);
}

TEST_CASE("members that leave are kept with their last readings and peak, the kernel too") {
  ForkedTree tree;
  ProbeOptions options;
  options.kernel_pid = tree.child;
  options.processes = std::make_shared<KernelProcesses>(tree.child);
  options.tree_rescan_interval = 0ms;
  linux_proc::ProcessTreeProbe probe(options);
  sample_now(probe);

  ::kill(tree.grandchild, SIGKILL);
  // The grandchild is the child's to reap, and the child is paused: it stays a zombie, which
  // counts as gone.
  for (int i = 0; i < 100 && probe.members().size() > 1; ++i) {
    std::this_thread::sleep_for(10ms);
    sample_now(probe);
  }
  REQUIRE(probe.members().size() == 1);
  auto gone = probe.departed();
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].pid == tree.grandchild);
  CHECK(gone[0].last.peak_rss >= static_cast<std::int64_t>(kHeld));
  CHECK(options.processes->belongs(tree.grandchild));
  CHECK_FALSE(options.processes->is_member(tree.grandchild));

  ::kill(tree.child, SIGKILL);
  ::waitpid(tree.child, nullptr, 0);
  probe.on_kernel_exit({true, SIGKILL});
  CHECK(probe.members().empty());
  gone = probe.departed();
  REQUIRE(gone.size() == 2);
  CHECK(gone[1].pid == tree.child);
  CHECK(gone[1].last.rss > 0);  // its last reading, not a zero from after death
  nlohmann::json report;
  probe.contribute(report);
  CHECK(report["process_tree"]["departed"][1]["is_kernel"] == true);
  CHECK(report["process_tree"]["departed"][0]["peak_rss"].get<std::int64_t>() >=
        static_cast<std::int64_t>(kHeld));
  tree.child = tree.grandchild = 0;  // both gone: the destructor leaves them alone
}

TEST_CASE("the departed list has a fixed size") {
  KernelProcesses processes(1);
  for (pid_t p = 100; p < 100 + static_cast<pid_t>(KernelProcesses::kDepartedKept) + 10; ++p)
    processes.departed(p);
  CHECK_FALSE(processes.belongs(100));
  CHECK(processes.belongs(109 + static_cast<pid_t>(KernelProcesses::kDepartedKept)));
  CHECK(processes.belongs(1));  // the root always belongs
}

TEST_CASE("statm's resident pages, and a process that has released its memory") {
  CHECK(kwd::platform::linux_proc::parse_statm_resident("61234 2560 1200 300 0 4000 0\n") == 2560);
  CHECK(kwd::platform::linux_proc::parse_statm_resident("0 0 0 0 0 0 0\n") == 0);
  CHECK_FALSE(kwd::platform::linux_proc::parse_statm_resident("garbage"));
  CHECK(kwd::platform::linux_proc::parse_statm_size("61234 2560 1200 300 0 4000 0\n") == 61234);
  CHECK_FALSE(kwd::platform::linux_proc::parse_statm_size("garbage 1"));
  CHECK_FALSE(kwd::platform::linux_proc::parse_statm_size(""));
  CHECK_FALSE(kwd::platform::linux_proc::parse_statm_resident("12 x 3"));
}

TEST_CASE("children born after the first scan are found by pid, and threads are not children") {
  int go[2], ready[2];
  REQUIRE(::pipe(go) == 0);
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    char c;
    (void)!::read(go[0], &c, 1);
    // Three threads (their tids are pids too, and their stat names our parent) and then a
    // grandchild, all after the probe's first scan.
    for (int i = 0; i < 3; ++i)
      std::thread([] { ::pause(); }).detach();
    const pid_t g = ::fork();
    if (g == 0) {
      for (;;)
        ::pause();
    }
    (void)!::write(ready[1], &g, sizeof g);
    for (;;)
      ::pause();
  }
  ProbeOptions options;
  options.kernel_pid = child;
  options.processes = std::make_shared<KernelProcesses>(child);
  options.tree_rescan_interval = 0ms;
  linux_proc::ProcessTreeProbe probe(options);
  sample_now(probe);
  REQUIRE(probe.members() == std::vector<pid_t>{child});

  REQUIRE(::write(go[1], "x", 1) == 1);
  pid_t grandchild = -1;
  REQUIRE(::read(ready[0], &grandchild, sizeof grandchild) == sizeof grandchild);
  const auto s = sample_now(probe);
  CHECK(probe.members() ==
        std::vector<pid_t>{std::min(child, grandchild), std::max(child, grandchild)});
  CHECK(s.processes == 2);
  ::kill(grandchild, SIGKILL);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  for (int fd : {go[0], go[1], ready[0], ready[1]})
    ::close(fd);
}

TEST_CASE(
    "a kernel whose /proc entry cannot be read: the reason names the file and the system's why") {
  ProbeOptions options;
  options.kernel_pid = 0x3ffffff;  // above pid_max: never a process
  options.processes = std::make_shared<KernelProcesses>(options.kernel_pid);
  linux_proc::ProcessTreeProbe probe(options);
  CHECK_FALSE(probe.status().available);
  CHECK(probe.status().reason == "cannot read /proc/" + std::to_string(options.kernel_pid) +
                                     "/stat: No such file or directory");
}

namespace {

// A child that waits to be killed, and is killed with this process if a failed check ends it
// first: nothing is left holding ctest's output open.
pid_t fork_sleeper() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (;;)
      ::pause();
  }
  return pid;
}

// Kills and reaps the children it holds when the test ends, however it ends.
struct Reaper {
  std::vector<pid_t> pids;
  ~Reaper() {
    for (const pid_t pid : pids) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

}  // namespace

TEST_CASE("new processes are looked at once for every kernel, and threads are no processes") {
  linux_proc::RecentProcesses recent("/proc");
  REQUIRE(recent.readable());
  Reaper reaper;
  const pid_t child = fork_sleeper();
  REQUIRE(child > 0);
  reaper.pids.push_back(child);
  std::atomic<pid_t> tid{0};
  std::atomic<bool> done{false};
  std::jthread thread([&] {
    tid = static_cast<pid_t>(::gettid());
    while (!done)
      std::this_thread::sleep_for(1ms);
  });
  struct Done {
    std::atomic<bool>& done;
    ~Done() { done = true; }
  } stop_thread{done};  // before the jthread joins, on any way out
  while (tid == 0)
    std::this_thread::sleep_for(1ms);
  CHECK(recent.newest(0) > 0);
  CHECK(recent.parent_of(child) == ::getpid());
  CHECK(recent.is_process(child));
  CHECK(recent.parent_of(tid) == ::getppid());  // a thread's stat names its process's parent
  CHECK_FALSE(recent.is_process(tid));
  // Above pid_max: never a process, and not remembered as gone for good (no reading has
  // named it, so it could be a process still being forked)...
  CHECK_FALSE(recent.parent_of(0x3ffffff));
  CHECK_FALSE(recent.settled(0x3ffffff));
  CHECK(recent.remembered() == 2);
  // ...but the other kernels' probes asking before the newest pid is read again (those of one
  // timer tick) share the answer, and the first ask after that reads the pid again.
  const auto reads = recent.stat_reads();
  CHECK_FALSE(recent.parent_of(0x3ffffff));
  CHECK(recent.stat_reads() == reads);
  CHECK(recent.newest(0) > 0);
  CHECK_FALSE(recent.parent_of(0x3ffffff));
  CHECK(recent.stat_reads() == reads + 1);
  CHECK(recent.remembered() == 2);
  // The listing of the table: taken after the newest pid was read, so the child is in it,
  // with its parent; threads are not.
  const auto in_listing = [&](pid_t pid) -> std::optional<pid_t> {
    const auto* listed = recent.processes();
    if (!listed) return std::nullopt;
    for (const auto& entry : *listed)
      if (entry.pid == pid) return entry.ppid;
    return std::nullopt;
  };
  CHECK(in_listing(child) == ::getpid());
  CHECK_FALSE(in_listing(tid));
  const pid_t later = fork_sleeper();
  REQUIRE(later > 0);
  reaper.pids.push_back(later);
  CHECK_FALSE(in_listing(later));  // kept until a new newest pid is read
  CHECK(recent.newest(0) > 0);
  CHECK(in_listing(later) == ::getpid());
  // A process that is gone, and was named by a reading long enough ago: remembered as gone.
  const pid_t gone = fork_sleeper();
  REQUIRE(gone > 0);
  ::kill(gone, SIGKILL);
  ::waitpid(gone, nullptr, 0);
  (void)recent.newest(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(linux_proc::RecentProcesses::kSettleMs));
  (void)recent.newest(0);
  const auto known_before = recent.remembered();
  CHECK_FALSE(recent.parent_of(gone));
  CHECK(recent.remembered() == known_before + 1);
  const auto reads_gone = recent.stat_reads();
  (void)recent.newest(0);
  CHECK_FALSE(recent.parent_of(gone));  // final: not read again, whatever the readings
  CHECK(recent.stat_reads() == reads_gone);
  // Answered from memory: the pid is not read again for another kernel.
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  CHECK(recent.parent_of(child) == ::getpid());
}

TEST_CASE("two kernels sharing the host's sources each find their own new children") {
  int go[2];
  REQUIRE(::pipe(go) == 0);
  std::vector<pid_t> kernels;
  for (int i = 0; i < 2; ++i) {
    const pid_t kernel = ::fork();
    REQUIRE(kernel >= 0);
    if (kernel == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a failed check must not leave it behind
      char c;
      (void)!::read(go[0], &c, 1);
      if (::fork() == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (;;)
          ::pause();
      }
      for (;;)
        ::pause();
    }
    kernels.push_back(kernel);
  }
  Reaper reaper{kernels};
  const auto host = std::make_shared<HostSources>();
  std::vector<std::unique_ptr<linux_proc::ProcessTreeProbe>> probes;
  for (const pid_t kernel : kernels) {
    ProbeOptions options;
    options.kernel_pid = kernel;
    options.processes = std::make_shared<KernelProcesses>(kernel);
    options.tree_rescan_interval = 0ms;
    options.host = host;
    probes.push_back(std::make_unique<linux_proc::ProcessTreeProbe>(options));
    sample_now(*probes.back());
  }
  CHECK(host->size() == 1);  // one RecentProcesses for both
  REQUIRE(::write(go[1], "xx", 2) == 2);
  // Each kernel has forked its child once both members lists grew.
  for (int round = 0; round < 500; ++round) {
    for (auto& probe : probes)
      sample_now(*probe);
    if (probes[0]->members().size() == 2 && probes[1]->members().size() == 2) break;
    std::this_thread::sleep_for(10ms);
  }
  for (std::size_t i = 0; i < 2; ++i) {
    const auto members = probes[i]->members();
    REQUIRE(members.size() == 2);
    CHECK(members[0] == kernels[i]);
    CHECK(members[1] != kernels[1 - i]);
  }
  CHECK(probes[0]->members()[1] != probes[1]->members()[1]);
  for (auto& probe : probes)
    ::kill(probe->members()[1], SIGKILL);
  for (const pid_t kernel : kernels) {
    ::kill(kernel, SIGKILL);
    ::waitpid(kernel, nullptr, 0);
  }
  for (int fd : go)
    ::close(fd);
}
