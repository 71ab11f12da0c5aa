#include <catch2/catch.hpp>

#include "kwd/probes/linux/kernel_log.hpp"

using namespace kwd::probes::linux_proc;

TEST_CASE("kmsg records: header, message, continuation lines") {
  const auto r = parse_kmsg_record(
      "3,1834,356789012,-;Memory cgroup out of memory: Killed process 18176 (python3) "
      "total-vm:345392kB, anon-rss:306164kB\n SUBSYSTEM=memory\n");
  REQUIRE(r);
  CHECK(r->sequence == 1834);
  CHECK(r->since_boot_us == 356789012);
  CHECK(r->message ==
        "Memory cgroup out of memory: Killed process 18176 (python3) total-vm:345392kB, "
        "anon-rss:306164kB");
  CHECK_FALSE(parse_kmsg_record("no header here"));
  CHECK_FALSE(parse_kmsg_record("6,12;too few fields"));
}

TEST_CASE("OOM-killer lines name the killed pid") {
  // As Linux 6.x prints them (taken from this machine's kernel log).
  const auto memcg = parse_oom_line(
      "Memory cgroup out of memory: Killed process 18176 (python3) total-vm:345392kB, "
      "anon-rss:306164kB, file-rss:9552kB, shmem-rss:0kB, UID:0 pgtables:704kB oom_score_adj:0");
  REQUIRE(memcg);
  CHECK(memcg->kind == OomLineKind::killed);
  CHECK(memcg->pid == 18176);
  CHECK(memcg->rss_bytes == (306164 + 9552 + 0) * 1024LL);

  const auto global = parse_oom_line(
      "Out of memory: Killed process 16359 (python3) total-vm:23476464kB, anon-rss:23443788kB");
  REQUIRE(global);
  CHECK(global->kind == OomLineKind::killed);
  CHECK(global->pid == 16359);
  CHECK_FALSE(global->rss_bytes);  // file-rss and shmem-rss cut off: no sum

  const auto summary = parse_oom_line(
      "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
      "oom_memcg=/a/kernel-watchdog-1,task_memcg=/a/"
      "kernel-watchdog-1,task=python3,pid=18176,uid=0");
  REQUIRE(summary);
  CHECK(summary->kind == OomLineKind::summary);
  CHECK(summary->pid == 18176);

  const auto reaped =
      parse_oom_line("oom_reaper: reaped process 18176 (python3), now anon-rss:0kB, file-rss:0kB");
  REQUIRE(reaped);
  CHECK(reaped->kind == OomLineKind::reaped);
  CHECK(reaped->pid == 18176);
  CHECK_FALSE(reaped->rss_bytes);  // what is left after the reap is not the kernel at its death
}

TEST_CASE("a kill's line gives the victim's RSS only when it says it whole") {
  const auto rss = [](std::string_view line) { return parse_oom_line(line)->rss_bytes; };
  CHECK(rss("Out of memory: Killed process 7 (R) total-vm:9kB, anon-rss:1kB, file-rss:2kB, "
            "shmem-rss:4kB, UID:1000 pgtables:1kB oom_score_adj:0") == 7 * 1024);
  CHECK_FALSE(rss("Killed process 7 (R) total-vm:9kB, anon-rss:1MB, file-rss:2kB, shmem-rss:4kB"));
  CHECK_FALSE(rss("Killed process 7 (R) total-vm:9kB, anon-rss:kB, file-rss:2kB, shmem-rss:4kB"));
  CHECK_FALSE(rss("Killed process 7 (R) total-vm:9kB, anon-rss:-1kB, file-rss:2kB, shmem-rss:4kB"));
  // The name is the process's own to choose; the kernel's fields come after it.
  CHECK(rss("Killed process 7 (anon-rss:9kB) total-vm:9kB, anon-rss:1kB, file-rss:2kB, "
            "shmem-rss:4kB") == 7 * 1024);
  CHECK_FALSE(
      rss("Killed process 7 (R) total-vm:9kB, anon-rss:99999999999999999kB, "
          "file-rss:2kB, shmem-rss:4kB"));
}

TEST_CASE("other kernel messages are not OOM evidence") {
  CHECK_FALSE(parse_oom_line("python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0"));
  CHECK_FALSE(parse_oom_line("traps: python3[1234] general protection fault ip:7f"));
  CHECK_FALSE(parse_oom_line("Killed process (python3)"));
  CHECK_FALSE(parse_oom_line("oom-kill:constraint=CONSTRAINT_NONE,task=python3,uid=0"));
  CHECK_FALSE(parse_oom_line(""));
}
