#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kwd::daemon {

// A running process of ours whose command line names a kernel connection file
// (`-f FILE` and the other spellings of protocol::find_connection_file).
struct KernelProcess {
  pid_t pid = -1;
  std::string connection_file;      // absolute (a relative one is resolved against its cwd)
  std::uint64_t start_time = 0;     // distinguishes a reused pid
  std::int64_t started_at_ms = -1;  // on the wall clock; -1 when not known
  // Started by `kernel-watchdog run` or `smoke` (its parent), or that launcher itself: it
  // is watched already.
  bool under_launcher = false;
  std::vector<std::string> argv;
  uid_t uid = 0;  // the process's owner
};

// Every such process of the current user (or of every user: set_all_users), found by scans of the
// process table (read through probes::ProcessRecord: /proc on Linux, libproc and KERN_PROCARGS2 on
// macOS), for less than examining every process each time: a process is examined (owner, command
// line, parent) at every scan during its first 5 s in the table (long enough for a forked child to
// exec), then in one regular scan of every five (a fifth of the table each scan), its verdict
// remembered in between for as long as its pid stays in the table; one found to be a kernel is not
// examined again, unless it was under a launcher (which may die and leave it to the daemon). A
// quick scan (the daemon's, every 25 ms after a connection file appeared) examines only the
// processes that are new: a kernel is found within one quick scan of its exec, and a shell that
// exec's into the kernel after activating an environment within five regular scans.
class KernelProcessScanner {
 public:
  enum class ScanKind { regular, quick };
  // The kernels in the table, pointing into the scanner's memory: valid until its next call.
  using Found = std::vector<const KernelProcess*>;
  Found scan(ScanKind kind = ScanKind::regular);
  // Examines these pids now, whatever the scans knew of them (they have just exec'd): the
  // kernels among them. The scans then remember the verdicts.
  Found examine_now(const std::vector<pid_t>& pids);
  // The kernels the last scans and examinations found, without looking at the table again.
  [[nodiscard]] Found known() const;
  // Whether every exec is announced (process events): then a new process is examined by the
  // scans once, not at every scan of its first seconds (those catch a fork's later exec,
  // which examine_now is told of).
  void set_execs_announced(bool announced) { execs_announced_ = announced; }
  // Every user's kernels, not only ours (the node's daemon, root, with --all-users).
  void set_all_users(bool all) { all_users_ = all; }

 private:
  struct Seen {
    std::int64_t first_seen_ms = 0;
    std::uint64_t listed_in = 0;  // the last scan whose listing had this pid
    int examined = 0;
    bool kernel = false;
    KernelProcess process;  // when kernel
  };
  // Kept in place from scan to scan (a thousand processes, most of them the same each
  // second): a pid no listing has any more is swept.
  std::unordered_map<pid_t, Seen> seen_;
  std::uint64_t scans_ = 0;
  std::uint64_t regular_scans_ = 0;
  bool execs_announced_ = false;
  bool all_users_ = false;
};

}  // namespace kwd::daemon
