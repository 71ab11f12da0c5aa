#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kwd/util/unique_fd.hpp"

namespace kwd::probes::linux_proc {

// What every kernel's tree probe asks when it looks for new descendants: the newest pid the
// system handed out (the last field of /proc/loadavg) and, for each pid created since, its
// parent and whether it leads a process (a thread's tid is a pid too). One per process (a
// HostSources source): a daemon watching hundreds of kernels reads each new pid's stat once,
// not once per kernel. Answers about a pid are kept for kKeepMs (pids grow with creation and
// are not handed out again until they wrap around, when all are forgotten); "gone" is final
// only once the pid is sure to have shown in /proc if it lived. Before that it is shared
// until the next reading of the newest pid (the probes of one timer tick ask once, not once
// each), and a caller that got it asks again later (settled()).
class RecentProcesses {
 public:
  static constexpr std::int64_t kKeepMs = 30'000;
  // A pid is sure to be in /proc, if it lives, this long after a reading named it.
  static constexpr std::int64_t kSettleMs = 50;

  explicit RecentProcesses(std::string proc_root);

  [[nodiscard]] bool readable() const { return static_cast<bool>(loadavg_fd_); }

  // The newest pid, read again if the last reading is older than `min_age_ms`; -1 if unknown.
  pid_t newest(std::int64_t min_age_ms);

  struct Listed {
    pid_t pid;
    pid_t ppid;
  };
  // Every process in the table (thread-group leaders: readdir of /proc lists no threads) and
  // its parent, listed after the last reading of newest(): each pid up to it that still lives
  // is there. Kernels found in a burst (a daemon started among many) share one listing.
  // nullptr if /proc cannot be listed.
  const std::vector<Listed>* processes();
  // The parent of `pid`; nullopt if it is gone (or unreadable).
  std::optional<pid_t> parent_of(pid_t pid);
  // Whether an answer about `pid` is final: it was handed out long enough ago to be in /proc
  // if it lives. A "gone" about a pid not settled yet may be a process still being forked.
  [[nodiscard]] bool settled(pid_t pid) const { return pid <= settled_newest_; }
  // Whether `pid` is a thread-group leader (a process, not a thread of one).
  bool is_process(pid_t pid);

  // Final answers kept; and how many times a pid's stat was read (tests).
  [[nodiscard]] std::size_t remembered() const {
    return static_cast<std::size_t>(std::count_if(
        known_.begin(), known_.end(), [](const auto& entry) { return !entry.second.unsettled; }));
  }
  [[nodiscard]] std::uint64_t stat_reads() const { return stat_reads_; }

 private:
  struct Known {
    pid_t ppid = -1;          // -1: gone when looked at
    std::int8_t leader = -1;  // -1: not looked at yet
    std::int64_t read_ms = 0;
    bool unsettled = false;     // "gone" before the pid settled: good for one reading,
    std::uint64_t reading = 0;  // this one (readings_ then)
  };
  Known& lookup(pid_t pid);
  pid_t read_newest();
  void forget_old(std::int64_t now_ms);

  std::string proc_;
  util::UniqueFd loadavg_fd_;
  pid_t newest_ = -1;
  std::int64_t newest_read_ms_ = -1;
  std::uint64_t readings_ = 0;    // of the newest pid (an unsettled answer is good for one)
  std::uint64_t stat_reads_ = 0;  // of any pid's stat, by lookup()
  std::unordered_map<pid_t, Known> known_;
  Known unsure_;               // an answer not kept (see lookup())
  pid_t settled_newest_ = -1;  // the newest pid of a reading kSettleMs old or more
  std::vector<Listed> listed_;
  bool listed_since_newest_ = false;
  std::int64_t forgot_at_ms_ = 0;
};

}  // namespace kwd::probes::linux_proc
