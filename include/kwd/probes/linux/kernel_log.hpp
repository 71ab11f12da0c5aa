#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace kwd::probes::linux_proc {

// One /dev/kmsg record: "PRIORITY,SEQUENCE,TIMESTAMP_US,FLAGS;MESSAGE\n" followed by
// optional " KEY=VALUE" continuation lines.
struct KmsgRecord {
  std::uint64_t sequence = 0;
  std::int64_t since_boot_us = 0;
  std::string_view message;  // the first line of the text, without the header
};
std::optional<KmsgRecord> parse_kmsg_record(std::string_view record);

// What an OOM-killer line says about which process it killed.
enum class OomLineKind {
  killed,   // "Out of memory: Killed process PID (comm) ..." and the memory-cgroup variant
  summary,  // "oom-kill:constraint=...,task=comm,pid=PID,uid=..."
  reaped,   // "oom_reaper: reaped process PID (comm), now anon-rss:..."
};
struct OomLine {
  OomLineKind kind;
  pid_t pid;
  // A kill's line: the victim's resident memory as the OOM killer found it (anon-rss +
  // file-rss + shmem-rss), the one measure taken at the very moment of death.
  std::optional<std::int64_t> rss_bytes;
};
std::optional<OomLine> parse_oom_line(std::string_view message);

}  // namespace kwd::probes::linux_proc
