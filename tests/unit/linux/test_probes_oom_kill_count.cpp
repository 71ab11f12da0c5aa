#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <thread>

#include "kwd/probes/linux/kernel_log_feed.hpp"
#include "kwd/probes/linux/oom_kill_count.hpp"
#include "temp_dir.hpp"

using namespace kwd::probes::linux_proc;

TEST_CASE("the machine's OOM-kill count from /proc/vmstat") {
  CHECK(parse_vmstat_oom_kill("nr_free_pages 1234\noom_kill 7\nnr_foll_pin_acquired 0\n") == 7);
  CHECK(parse_vmstat_oom_kill("oom_kill 0") == 0);
  CHECK_FALSE(parse_vmstat_oom_kill("nr_free_pages 1234\n"));  // before Linux 4.13
  CHECK_FALSE(parse_vmstat_oom_kill("oom_kill x\n"));
  CHECK_FALSE(parse_vmstat_oom_kill("oom_kill_disable 3\n"));
  CHECK(OomKillCount().read().has_value());  // this machine's
  CHECK_FALSE(OomKillCount("/nonexistent/vmstat").read());
}

namespace {

// A kernel log and a vmstat in files: the log's records are appended one per read, as
// /dev/kmsg gives one per read().
struct FakeHost {
  kwd::test::TempDir dir{"kwd-oom-count"};
  std::filesystem::path kmsg = dir.write("kmsg", "6,1,1,-;boot\n");
  std::filesystem::path vmstat = dir.write("vmstat", "nr_free_pages 1\noom_kill 5\n");
  std::uint64_t sequence = 2;

  void count(int kills) const {
    dir.write("vmstat", "nr_free_pages 1\noom_kill " + std::to_string(kills) + "\n");
  }
  void log_kill(int pid) {
    std::ofstream(kmsg, std::ios::app)
        << "3," << sequence++ << ",2,-;Out of memory: Killed process " << pid
        << " (python3) total-vm:1kB, anon-rss:1kB\n";
  }
};

}  // namespace

TEST_CASE("the feed's OOM-kill count against its lines: a kill's line is due until read") {
  FakeHost host;
  KernelLogFeed feed(host.kmsg.string(), host.vmstat.string());
  REQUIRE(feed.valid());
  REQUIRE(feed.counts_oom_kills());
  CHECK(feed.oom_kills_counted() == 0);

  host.count(6);  // counted and signalled: the line comes a moment later
  CHECK(feed.oom_kills_counted() == 1);
  CHECK(feed.kill_lines_read() == 0);
  host.log_kill(4242);
  feed.read_new();
  CHECK(feed.kill_lines_read() == 1);
  CHECK(feed.oom_kills_counted() == 1);

  // A periodic read (of a log last read longer ago than it allows) settles the count.
  const auto periodic_read = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    feed.read_new(1);
  };
  SECTION("a line that never comes stops being due after two periodic reads") {
    host.count(7);
    periodic_read();
    CHECK(feed.oom_kills_counted().value() - feed.kill_lines_read() == 1);
    periodic_read();
    CHECK(feed.oom_kills_counted().value() - feed.kill_lines_read() == 0);
  }
  SECTION("a line of a kill counted before the feed opened is taken back") {
    host.log_kill(77);
    periodic_read();
    CHECK(feed.kill_lines_read() == 2);
    CHECK(feed.oom_kills_counted().value() - feed.kill_lines_read() == 0);
  }
}

TEST_CASE("without the machine's count the feed says so") {
  FakeHost host;
  KernelLogFeed feed(host.kmsg.string(), (host.dir.path / "none").string());
  CHECK(feed.valid());
  CHECK_FALSE(feed.counts_oom_kills());
  CHECK_FALSE(feed.oom_kills_counted());
}
