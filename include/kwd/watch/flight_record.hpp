#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kwd/timeline/memory_sample.hpp"

namespace kwd::watch {

// What `run` knows of its kernel, kept in the report store while the kernel lives, for the
// death nobody is left to report: a container's whole cgroup OOM-killed (memory.oom.group,
// cgroup v2's default for pods on Kubernetes >= 1.28), or stopped with SIGKILL, takes the
// watchdog with the kernel. The next watchdog started in that place (the container's restart,
// or the daemon) finds the record of a watchdog that is gone and writes the report from it.
// Small and rewritten only when what it says changes (a cell starts or ends, the memory moves
// a step nearer its limit, at most once a second otherwise), never per sample. Whether its
// watchdog lives is told by a lock the watchdog holds for its life (<name>.lock, flock), not
// by pids: the store may be shared with other containers, whose pid namespaces differ.
struct FlightRecord {
  std::string token;  // random: the name of this record and its lock, never reused
  pid_t watchdog_pid = -1;
  std::uint64_t watchdog_start_time = 0;  // with the pid: this process, not a later one
  pid_t kernel_pid = -1;
  std::uint64_t kernel_start_time = 0;
  std::string boot_id;  // pids and process starts mean nothing across boots
  std::string host;     // a store shared across machines (an NFS home) holds others' records
  // The watchdog's pid namespace (its inode): pids are compared, and the kernel log's pids
  // (the initial namespace's) matched, only within the same one.
  std::uint64_t pid_namespace = 0;
  // The end was asked for (a shutdown_reply, the manager's SIGUSR2, a termination signal): a
  // record left by a watchdog killed after that is no death to report.
  bool end_requested = false;
  std::int64_t kernel_started_at_ms = 0;
  std::int64_t written_at_ms = 0;
  std::string kernel_id;
  std::string connection_file;
  std::string notebook;
  std::vector<std::string> argv;

  std::string state;  // the kernel's execution state: starting, busy, idle, hung
  // The cell in flight (execution_count -1: none).
  std::int64_t cell_execution_count = -1;
  std::string cell_code;  // its first kMaxCodeBytes
  std::int64_t cell_started_at_ms = -1;

  // The newest memory sample's (timeline::kUnknown where not measured).
  std::int64_t sampled_at_ms = 0;
  std::int64_t rss = timeline::kUnknown;
  std::int64_t cgroup_usage = timeline::kUnknown;
  std::int64_t cgroup_limit = timeline::kUnknown;
  std::int64_t mem_total = timeline::kUnknown;
  std::int64_t gpu_used = timeline::kUnknown;

  // The kernel's memory cgroup and its OOM-kill counter when the record was written: a
  // counter found higher afterwards says the OOM killer fired there since.
  std::string memory_cgroup_dir;
  std::uint64_t memory_cgroup_inode = 0;  // another inode there later: another cgroup (a
                                          // restarted container's, under a cgroup namespace)
  int memory_cgroup_version = 0;
  std::optional<std::int64_t> cgroup_oom_kills;

  static constexpr std::size_t kMaxCodeBytes = 2048;
};

std::string to_text(const FlightRecord& record);
// nullopt when the text is not such a record (a damaged file is read as none).
std::optional<FlightRecord> parse_flight_record(std::string_view text);

// The step of memory the record is at: 0 below half of the tightest limit it knows (the
// cgroup's, else the machine's), then every tenth, then every hundredth from nine tenths
// (where an OOM kill comes from). -1 when no limit is known. A rewrite is due when it moves.
int memory_step(const FlightRecord& record);

// Whether `now` is another cell than `written`, or its end was asked for since: rewritten at
// once.
bool flight_cell_changed(const FlightRecord& written, const FlightRecord& now);
// Whether its memory says something new: another memory step, or the tree's memory moved by
// more than a quarter (64 MiB at least). Rewritten at once while it climbs past the highest
// step written from nine tenths on, else at most once a second (a cgroup held at its limit by
// page cache moves between hundredths all the time).
bool flight_memory_changed(const FlightRecord& written, const FlightRecord& now);

// "<prefix><kernel pid>-<watchdog pid>-<token>", and its lock "<that>.lock": dot-files, which
// the store's listing leaves out.
inline constexpr std::string_view kFlightRecordPrefix = ".flight-";
inline constexpr std::string_view kFlightLockSuffix = ".lock";
std::string flight_record_name(const FlightRecord& record);

// This machine's name (uname's nodename), as records say it.
std::string this_host();

// The pid namespace of the initial process (PROC_PID_INIT_INO): the kernel log's pids are its.
inline constexpr std::uint64_t kInitialPidNamespace = 0xEFFFFFFCu;

}  // namespace kwd::watch
