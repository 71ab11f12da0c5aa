// Command lines and environments of other processes: the NUL-separated texts of Linux's
// /proc, macOS's KERN_PROCARGS2 buffer (built here byte by byte as the Darwin kernel lays it
// out), and ProcessRecord against a real child process.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "kwd/probes/process_record.hpp"
#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/util/process_args.hpp"

namespace {

using kwd::util::parse_kern_procargs2;
using namespace std::string_literals;

std::string procargs2(int argc, const std::string& rest) {
  std::string out(sizeof argc, '\0');
  std::memcpy(out.data(), &argc, sizeof argc);
  return out + rest;
}

}  // namespace

TEST_CASE("NUL-separated text splits into its entries, a missing last NUL included") {
  using kwd::util::split_nul;
  CHECK(split_nul("python3\0-f\0k.json\0"s) == std::vector<std::string>{"python3", "-f", "k.json"});
  CHECK(split_nul("a\0\0b"s) == std::vector<std::string>{"a", "", "b"});
  CHECK(split_nul("").empty());
}

TEST_CASE(
    "KERN_PROCARGS2: argv after the executable's path and its padding, then the environment") {
  const auto buffer =
      procargs2(3,
                "/usr/bin/python3\0\0\0\0python3\0-f\0/tmp/kernel-1.json\0HOME=/Users/me\0"
                "JPY_SESSION_NAME=/Users/me/a.ipynb\0\0ptr_munge=\0main_stack=\0"s);
  const auto args = parse_kern_procargs2(buffer);
  REQUIRE(args);
  CHECK(args->argv == std::vector<std::string>{"python3", "-f", "/tmp/kernel-1.json"});
  CHECK(args->environment ==
        std::vector<std::string>{"HOME=/Users/me", "JPY_SESSION_NAME=/Users/me/a.ipynb"});
  CHECK(kwd::util::environment_value(args->environment, "JPY_SESSION_NAME") == "/Users/me/a.ipynb");
  CHECK_FALSE(kwd::util::environment_value(args->environment, "HOM"));
}

TEST_CASE("KERN_PROCARGS2: empty arguments are kept and an environment may end the buffer") {
  const auto args = parse_kern_procargs2(procargs2(3, "/bin/x\0x\0\0last\0A=1"s));
  REQUIRE(args);
  CHECK(args->argv == std::vector<std::string>{"x", "", "last"});
  CHECK(args->environment == std::vector<std::string>{"A=1"});
}

TEST_CASE("KERN_PROCARGS2: short or empty buffers are refused, never read past") {
  CHECK_FALSE(parse_kern_procargs2(""));
  CHECK_FALSE(parse_kern_procargs2("\1\0"s));
  CHECK_FALSE(parse_kern_procargs2(procargs2(0, "/bin/x\0\0"s)));
  CHECK_FALSE(parse_kern_procargs2(procargs2(-4, "/bin/x\0x\0"s)));
  CHECK_FALSE(parse_kern_procargs2(procargs2(1, "/bin/x-without-end")));
  CHECK_FALSE(parse_kern_procargs2(procargs2(1, "/bin/x\0\0\0"s)));
  CHECK_FALSE(parse_kern_procargs2(procargs2(3, "/bin/x\0x\0y\0"s)));  // argc says more
  CHECK(parse_kern_procargs2(procargs2(2, "/bin/x\0x\0y\0"s)));
}

TEST_CASE("a launcher's argv is told from a kernel's") {
  using kwd::protocol::is_watchdog_launcher;
  CHECK(is_watchdog_launcher({"/usr/bin/kernel-watchdog", "run", "--", "python3", "-f", "k.json"}));
  CHECK(is_watchdog_launcher({"kernel-watchdog", "--log-format", "json", "smoke", "a.ipynb"}));
  CHECK_FALSE(is_watchdog_launcher({"kernel-watchdog", "daemon"}));
  CHECK_FALSE(is_watchdog_launcher({"kernel-watchdog", "--", "run"}));
  CHECK_FALSE(is_watchdog_launcher({"python3", "run"}));
  CHECK_FALSE(is_watchdog_launcher({"kernel-watchdog"}));
}

TEST_CASE("a process record reads another process's argv, environment, parent and directory") {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::chdir("/") != 0) ::_exit(126);
    char mark[] = "KWD_RECORD_MARK=planted value";
    char* env[] = {mark, nullptr};
    ::execle("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr), env);
    ::_exit(127);
  }
  std::vector<std::string> argv;
  for (int i = 0; i < 200 && argv != std::vector<std::string>{"sleep", "30"}; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // until it has exec'd
    const auto record = kwd::probes::ProcessRecord::open(child);
    if (record) argv = record->argv();
  }
  CHECK(argv == std::vector<std::string>{"sleep", "30"});

  const auto record = kwd::probes::ProcessRecord::open(child);
  REQUIRE(record);
  CHECK(record->pid() == child);
  CHECK(record->owner() == ::geteuid());
  CHECK(record->environment() == std::vector<std::string>{"KWD_RECORD_MARK=planted value"});
  const auto lineage = record->lineage();
  REQUIRE(lineage);
  CHECK(lineage->ppid == ::getpid());
  CHECK(lineage->start_time > 0);
  // Its start on the wall clock (the daemon's start-up rule compares it with samples): this
  // test forked it seconds ago (the boot time is in whole seconds; the wait above is at most
  // 2 s).
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  CHECK(lineage->started_at_ms > now_ms - 10'000);
  CHECK(lineage->started_at_ms <= now_ms + 1'000);
  CHECK(record->cwd() == "/");
  const auto listed = kwd::probes::list_processes();
  CHECK(std::find(listed.begin(), listed.end(), child) != listed.end());
  CHECK(std::find(listed.begin(), listed.end(), ::getpid()) != listed.end());

  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  // Gone: the record held open answers nothing rather than another process's facts.
  CHECK_FALSE(record->lineage());
  CHECK(record->argv().empty());
  CHECK_FALSE(kwd::probes::ProcessRecord::open(child));
}
