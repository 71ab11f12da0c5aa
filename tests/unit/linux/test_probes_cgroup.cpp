#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "kwd/diagnosis/diagnose.hpp"
#include "kwd/platform/linux/cgroup_fs.hpp"
#include "kwd/platform/linux/kernel_cgroup.hpp"
#include "kwd/platform/linux/procfs.hpp"
#include "kwd/probes/linux/cgroup_probe.hpp"
#include "kwd/probes/linux/oom_killer_probe.hpp"
#include "kwd/util/unique_fd.hpp"
#include "temp_dir.hpp"

using namespace kwd::probes;
using namespace kwd::probes::linux_proc;
using namespace kwd::platform::linux_proc;
namespace cg = kwd::platform::linux_cgroup;

TEST_CASE("mountinfo: the v1 memory hierarchy and the unified one") {
  const auto m = parse_cgroup_mounts(
      "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
      "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
      "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
  REQUIRE(m.v1_memory);
  CHECK(m.v1_memory->mount_point == "/sys/fs/cgroup/memory");
  REQUIRE(m.v2);
  CHECK(m.v2->mount_point == "/sys/fs/cgroup/unified");

  const auto v2only = parse_cgroup_mounts(
      "25 30 0:23 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
      "26 30 0:24 /docker/abc /my\\040mount rw - cgroup cgroup rw,cpu,memory\n");
  REQUIRE(v2only.v2);
  CHECK(v2only.v2->mount_point == "/sys/fs/cgroup");
  REQUIRE(v2only.v1_memory);
  CHECK(v2only.v1_memory->root == "/docker/abc");
  CHECK(v2only.v1_memory->mount_point == "/my mount");
}

TEST_CASE("/proc/PID/cgroup and the directories it names") {
  const auto where = parse_proc_cgroup(
      "9:name=systemd:/\n5:cpu,memory:/process_api/abc\n0::/user.slice/app:1.scope\n");
  REQUIRE(where.v1_memory);
  CHECK(*where.v1_memory == "/process_api/abc");
  REQUIRE(where.v2);
  CHECK(*where.v2 == "/user.slice/app:1.scope");
  CHECK(cgroup_dir({"/", "/sys/fs/cgroup"}, "/a/b") == "/sys/fs/cgroup/a/b");
  CHECK(cgroup_dir({"/", "/sys/fs/cgroup"}, "/") == "/sys/fs/cgroup");
  CHECK(cgroup_dir({"/docker/abc", "/sys/fs/cgroup/memory"}, "/docker/abc/x") ==
        "/sys/fs/cgroup/memory/x");
  CHECK_FALSE(cgroup_dir({"/docker/abc", "/m"}, "/other"));
  CHECK_FALSE(cgroup_dir({"/docker/abc", "/m"}, "/docker/abcdef"));
}

TEST_CASE("cgroup control files") {
  const auto events =
      parse_flat_keyed("low 0\nhigh 12\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n");
  CHECK(events.at("high") == 12);
  CHECK(events.at("oom_kill") == 1);
  CHECK(parse_flat_keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n").at("oom_kill") == 2);
  CHECK_FALSE(parse_memory_limit("max\n"));
  CHECK_FALSE(parse_memory_limit("9223372036854771712\n"));  // v1's "unlimited", 4 KiB pages
  CHECK(parse_memory_limit("314572800\n") == 314572800);
  CHECK(parse_number("1234\n") == 1234);
  CHECK_FALSE(parse_number("12x"));
}

TEST_CASE("this process's memory cgroup is found") {
  const auto mine = memory_cgroup_of(::getpid());
  REQUIRE(mine);  // this machine: cgroup v1 memory controller at /sys/fs/cgroup/memory
  struct stat st {};
  CHECK(::stat(mine->dir.c_str(), &st) == 0);
  CHECK(mine->dir.starts_with(mine->top_dir));
  const auto again = memory_cgroup_at(mine->dir);
  REQUIRE(again);
  CHECK(again->path == mine->path);
  CHECK(again->version == mine->version);
}

TEST_CASE("a kernel cgroup is made with its limit and removed with what is left in it") {
  auto cgroup = cg::KernelCgroup::create(64u << 20);
  struct stat st {};
  REQUIRE(::stat(cgroup.dir().c_str(), &st) == 0);
  const auto limit_file =
      cgroup.dir() + (cgroup.version() == 2 ? "/memory.max" : "/memory.limit_in_bytes");
  CHECK(parse_memory_limit(*read_small_file(limit_file)) == (64 << 20));

  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    for (;;)
      ::pause();
  }
  cgroup.add(child);
  const auto where = read_small_file("/proc/" + std::to_string(child) + "/cgroup");
  REQUIRE(where);
  const auto probe_view = memory_cgroup_of(child);
  REQUIRE(probe_view);
  CHECK(probe_view->dir == cgroup.dir());

  // remove() kills what is left (the kernel's orphans) and removes the directory.
  const std::string dir = cgroup.dir();
  CHECK(cgroup.remove().empty());
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  CHECK(::stat(dir.c_str(), &st) != 0);
}

TEST_CASE("stale cgroups of dead watchdogs are swept") {
  const auto mine = memory_cgroup_of(::getpid());
  REQUIRE(mine);
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = mine->dir + "/kernel-watchdog-" + std::to_string(dead);
  REQUIRE(::mkdir(stale.c_str(), 0755) == 0);
  CHECK(cg::sweep_stale_cgroups(mine->dir) >= 1);
  struct stat st {};
  CHECK(::stat(stale.c_str(), &st) != 0);
}

namespace {

// What run() gives the probes for a kernel in the cgroup the watchdog made for it.
ProbeOptions options_for(pid_t kernel, const cg::KernelCgroup& cgroup) {
  ProbeOptions options;
  options.kernel_pid = kernel;
  options.cgroup_path = cgroup.dir();
  options.processes = std::make_shared<KernelProcesses>(kernel);
  return options;
}

}  // namespace

TEST_CASE(
    "a real OOM kill in a kernel cgroup: the counter rises and the kernel log names the pid") {
  auto cgroup = cg::KernelCgroup::create(32u << 20);
  int go[2];
  REQUIRE(::pipe(go) == 0);
  const pid_t victim = ::fork();
  REQUIRE(victim >= 0);
  if (victim == 0) {
    char c;
    (void)!::read(go[0], &c, 1);
    // Touch twice the limit: the memory cgroup's OOM killer ends this process.
    const std::size_t size = 64u << 20;
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    std::memset(p, 1, size);
    ::_exit(0);
  }
  ::close(go[0]);
  cgroup.add(victim);

  // As in the daemon: the kernel log is one source, read by every watched kernel's probe.
  const auto host = std::make_shared<kwd::probes::HostSources>();
  ProbeOptions options = options_for(victim, cgroup);
  options.host = host;
  CgroupProbe cgroup_probe(options);
  OomKillerProbe oom_probe(options);
  ProbeOptions bystander_options;
  bystander_options.kernel_pid = ::getpid();
  bystander_options.host = host;
  OomKillerProbe bystander(bystander_options);  // another kernel's
  CHECK(host->size() == 1);                     // one kernel log reader for both
  REQUIRE(cgroup_probe.status().available);

  REQUIRE(::write(go[1], "x", 1) == 1);
  ::close(go[1]);
  int status = 0;
  REQUIRE(::waitpid(victim, &status, 0) == victim);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);

  const KernelExit how{true, SIGKILL};
  cgroup_probe.on_kernel_exit(how);
  oom_probe.on_kernel_exit(how);
  nlohmann::json report;
  cgroup_probe.contribute(report);
  oom_probe.contribute(report);
  INFO(report.dump(2));
  CHECK(report["cgroup"]["created_by_watchdog"] == true);
  CHECK(report["cgroup"]["limit"] == (32 << 20));
  CHECK(report["cgroup"]["oom_kill_delta"] == 1);
  // The probes record; the diagnosis alone calls it an OOM kill.
  CHECK(kwd::diagnosis::diagnose(report)["cause"] == "oom_killed_cgroup");
  if (oom_probe.status().available) {  // /dev/kmsg is readable here (root)
    CHECK(report["oom_evidence"]["matched_pids"] == nlohmann::json::array({victim}));
    CHECK(report["oom_evidence"]["kernel_pid_named"] == true);
    bool named = false;
    for (const auto& line : report["oom_evidence"]["kernel_log"])
      named |= line.get<std::string>().find("Killed process " + std::to_string(victim)) !=
               std::string::npos;
    CHECK(named);
    // The other kernel's probe read the same line from the same descriptor, and knows it
    // is not about its kernel.
    kwd::timeline::MemorySample sample;
    bystander.sample(sample);
    nlohmann::json other;
    bystander.contribute(other);
    INFO(other.dump(2));
    CHECK(other["oom_evidence"]["matched_pids"].empty());
    CHECK(other["oom_evidence"]["other_oom_kills_seen"].get<int>() >= 1);
  }
  CHECK(cgroup.remove().empty());
}

namespace {

bool write_text(const std::string& path, const std::string& text) {
  kwd::util::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  return fd.get() >= 0 &&
         ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

// A child in `cgroup` that touches `bytes` more each time it is told to, and says when done.
struct GrowingChild {
  pid_t pid = -1;
  int go = -1, done = -1;
  GrowingChild(cg::KernelCgroup& cgroup, std::size_t bytes) {
    int to_child[2], from_child[2];
    REQUIRE(::pipe(to_child) == 0);
    REQUIRE(::pipe(from_child) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      char c;
      while (::read(to_child[0], &c, 1) == 1) {
        void* p =
            ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        std::memset(p, 1, bytes);
        (void)!::write(from_child[1], "y", 1);
      }
      ::_exit(0);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    go = to_child[1];
    done = from_child[0];
    cgroup.add(pid);
  }
  void grow() const {
    char c;
    REQUIRE(::write(go, "x", 1) == 1);
    REQUIRE(::read(done, &c, 1) == 1);
  }
  ~GrowingChild() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ::close(go);
    ::close(done);
  }
};

// Two samples of a cgroup probe, with 32 MiB touched in between.
std::pair<kwd::timeline::MemorySample, kwd::timeline::MemorySample> samples_around_growth(
    cg::KernelCgroup& cgroup) {
  GrowingChild child(cgroup, 32u << 20);
  ProbeOptions options = options_for(child.pid, cgroup);
  options.slow_interval = std::chrono::hours(1);  // only the first sample is a slow round
  CgroupProbe probe(options);
  REQUIRE(probe.status().available);
  kwd::timeline::MemorySample first, second;
  probe.sample(first);
  child.grow();
  probe.sample(second);
  return {first, second};
}

}  // namespace

TEST_CASE("cgroup usage is read every sample under a limit, at the slow rate without one") {
  {
    auto limited = cg::KernelCgroup::create(256u << 20);
    const auto [before, after] = samples_around_growth(limited);
    CHECK(before.cgroup_limit == (256 << 20));
    CHECK(before.cgroup_usage >= 0);
    CHECK(after.cgroup_usage >= before.cgroup_usage + (30 << 20));
    CHECK(limited.remove().empty());
  }
  {
    auto unlimited = cg::KernelCgroup::create(256u << 20);
    if (unlimited.version() == 2) {
      REQUIRE(write_text(unlimited.dir() + "/memory.max", "max"));
    } else {
      // The swap+memory limit first: the memory limit may never exceed it.
      (void)write_text(unlimited.dir() + "/memory.memsw.limit_in_bytes", "-1");
      REQUIRE(write_text(unlimited.dir() + "/memory.limit_in_bytes", "-1"));
    }
    const auto [before, after] = samples_around_growth(unlimited);
    CHECK(before.cgroup_usage >= 0);
    if (before.cgroup_limit < 0)
      CHECK(after.cgroup_usage == before.cgroup_usage);  // held until the next slow round
    else
      WARN("a parent cgroup's limit is in force here: the usage is read every sample");
    CHECK(unlimited.remove().empty());
  }
}

TEST_CASE("a SIGKILL without memory pressure is no OOM evidence") {
  auto cgroup = cg::KernelCgroup::create(256u << 20);
  const pid_t victim = ::fork();
  REQUIRE(victim >= 0);
  if (victim == 0) {
    for (;;)
      ::pause();
  }
  cgroup.add(victim);
  const ProbeOptions options = options_for(victim, cgroup);
  CgroupProbe cgroup_probe(options);
  OomKillerProbe oom_probe(options);
  // The cgroup is the watchdog's: its memory.stat is read for the thrash guard. Another
  // kernel's cgroup (the daemon's, found by pid) never costs that read.
  kwd::timeline::MemorySample sample;
  cgroup_probe.sample(sample);
  CHECK(sample.cgroup_file_cache >= 0);
  CHECK(sample.cgroup_refaults >= 0);
  ProbeOptions found_by_pid;
  found_by_pid.kernel_pid = victim;
  CgroupProbe not_ours(found_by_pid);
  REQUIRE(not_ours.status().available);
  kwd::timeline::MemorySample theirs;
  not_ours.sample(theirs);
  CHECK(theirs.cgroup_usage >= 0);
  CHECK(theirs.cgroup_file_cache == kwd::timeline::kUnknown);
  CHECK(theirs.cgroup_refaults == kwd::timeline::kUnknown);
  ::kill(victim, SIGKILL);
  ::waitpid(victim, nullptr, 0);
  cgroup_probe.on_kernel_exit({true, SIGKILL});
  oom_probe.on_kernel_exit({true, SIGKILL});  // waits its grace period for a line that never comes
  nlohmann::json report;
  cgroup_probe.contribute(report);
  oom_probe.contribute(report);
  CHECK(report["cgroup"]["oom_kill_delta"] == 0);
  CHECK(kwd::diagnosis::diagnose(report)["cause"] != "oom_killed_cgroup");
  CHECK(kwd::diagnosis::diagnose(report)["cause"] != "oom_killed_system");
  CHECK(report["oom_evidence"]["kernel_log"].empty());
  CHECK(report["oom_evidence"]["matched_pids"].empty());

  // The same SIGKILL, sent by the thrash guard at the watchdog's own limit: the limit killed
  // it, and the headline says by whose hand.
  report["termination"] = {{"kind", "signal"},
                           {"signal", SIGKILL},
                           {"signal_name", "SIGKILL"},
                           {"returncode", -SIGKILL},
                           {"exit_code", nullptr},
                           {"core_dumped", false},
                           {"description", "killed by SIGKILL"}};
  report["memory_thrash"] = {{"ended_by_watchdog", true}, {"since_ms", 1000},
                             {"at_ms", 31'000},           {"seconds", 30.0},
                             {"thrash_timeout_s", 30},    {"limit_bytes", 256 << 20},
                             {"usage_bytes", 256 << 20},  {"most_file_cache_bytes", 3 << 20},
                             {"refaults", 8250},          {"refaults_per_second", 275.0}};
  auto thrashed = kwd::diagnosis::diagnose(report);
  INFO(thrashed.dump(2));
  CHECK(thrashed["cause"] == "oom_killed_cgroup");
  const auto headline = thrashed["headline"].get<std::string>();
  CHECK(
      headline.starts_with("Ended by kernel-watchdog: the kernel filled the memory limit "
                           "kernel-watchdog set for it (--memory-limit, 256.0 MiB) and thrashed "
                           "there for 30 s"));
  bool told = false;
  for (const auto& e : thrashed["evidence"])
    told = told ||
           e["fact"].get<std::string>().find("275 evicted pages a second") != std::string::npos;
  CHECK(told);
  // Sent nothing (the kernel was gone already): the guard's spell is no cause of its own.
  report["memory_thrash"]["ended_by_watchdog"] = false;
  CHECK(kwd::diagnosis::diagnose(report)["cause"] != "oom_killed_cgroup");
  // Sent, but the kernel had died of something else before it came (not yet reaped).
  report["memory_thrash"]["ended_by_watchdog"] = true;
  report["termination"]["signal"] = SIGSEGV;
  report["termination"]["signal_name"] = "SIGSEGV";
  report["termination"]["returncode"] = -SIGSEGV;
  CHECK(kwd::diagnosis::diagnose(report)["cause"] != "oom_killed_cgroup");
  CHECK(cgroup.remove().empty());
}

TEST_CASE("kernels of one cgroup share one reader of its files while any of them is watched") {
  auto cgroup = cg::KernelCgroup::create(256u << 20);
  const auto host = std::make_shared<HostSources>();
  const auto open_fds = [] {
    std::size_t n = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      (void)entry;
      ++n;
    }
    return n;
  };
  ProbeOptions options = options_for(::getpid(), cgroup);
  options.host = host;
  // The mount table is the process's, read through one mountinfo fd kept for its lifetime
  // (it pins no cgroup): opened here, before counting, whichever test case came first.
  REQUIRE(cgroup_mounts());
  const std::size_t before = open_fds();
  {
    auto first = std::make_unique<CgroupProbe>(options);
    REQUIRE(first->status().available);
    const std::size_t with_one = open_fds();
    CHECK(with_one > before);
    CgroupProbe second(options);
    CHECK(open_fds() == with_one);  // the second kernel opened nothing of its own
    kwd::timeline::MemorySample a, b;
    first->sample(a);
    second.sample(b);
    CHECK(a.cgroup_limit == (256 << 20));
    CHECK(b.cgroup_limit == a.cgroup_limit);
    CHECK(b.cgroup_usage == a.cgroup_usage);
    first.reset();
    CHECK(open_fds() == with_one);  // still the second kernel's
  }
  CHECK(open_fds() == before);  // closed with the last kernel: a removed cgroup is not pinned
  CHECK(cgroup.remove().empty());
}

TEST_CASE("memory.stat: page cache and pages read back, in each kernel's words") {
  kwd::test::TempDir dir("kwd-cgroup-stat");
  const auto reader_over = [&](int version, const std::string& stat) {
    const std::string usage = version == 2 ? "memory.current" : "memory.usage_in_bytes";
    std::ofstream(dir.path / usage) << "1000\n";
    std::ofstream(dir.path / "memory.stat") << stat;
    MemoryCgroup cgroup;
    cgroup.version = version;
    cgroup.path = "/k";
    cgroup.dir = dir.path.string();
    cgroup.top_dir = dir.path.string();
    auto reader = std::make_unique<CgroupReader>(cgroup, "");
    reader->refresh_slow(0);
    CHECK_FALSE(reader->file_cache);  // read only when asked for
    reader->read_stat_too();
    reader->refresh_slow(0);
    return reader;
  };
  SECTION("v2, Linux 5.9 and later: file refaults, never the anon ones (swap-ins)") {
    const auto r = reader_over(2,
                               "anon 1000\nfile 9000\nactive_file 3000\ninactive_file 4000\n"
                               "workingset_refault_anon 500\nworkingset_refault_file 42\n"
                               "pgmajfault 7\n");
    CHECK(r->file_cache == 7000);
    CHECK(r->refaults == 42);
  }
  SECTION("v2 before 5.9: one refault counter") {
    const auto r =
        reader_over(2, "active_file 10\ninactive_file 20\nworkingset_refault 33\npgmajfault 7\n");
    CHECK(r->file_cache == 30);
    CHECK(r->refaults == 33);
  }
  SECTION("v1 since 6.1: the cgroup's own counters, not the hierarchy's total_") {
    const auto r = reader_over(1,
                               "cache 900\nrss 100\nactive_file 300\ninactive_file 400\n"
                               "workingset_refault_anon 0\nworkingset_refault_file 11\n"
                               "pgmajfault 5\ntotal_active_file 999\n"
                               "total_workingset_refault_file 999\n");
    CHECK(r->file_cache == 700);
    CHECK(r->refaults == 11);
  }
  SECTION("v1 before 6.1: no refaults for the cgroup, its major faults instead") {
    const auto r = reader_over(1, "cache 900\nactive_file 300\ninactive_file 400\npgmajfault 5\n");
    CHECK(r->file_cache == 700);
    CHECK(r->refaults == 5);
  }
  SECTION("a stat without the file lists says nothing of the cache") {
    const auto r = reader_over(2, "anon 5\n");
    CHECK_FALSE(r->file_cache);
    CHECK_FALSE(r->refaults);
  }
}
