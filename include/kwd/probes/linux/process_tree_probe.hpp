#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kwd/probes/kernel_processes.hpp"
#include "kwd/probes/linux/recent_processes.hpp"
#include "kwd/probes/probe.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::probes::linux_proc {

// The kernel and every descendant (multiprocessing workers, data loaders).
// - RSS at full rate from /proc/PID/statm (kept open and re-read with pread: the cheapest
//   procfs file that has it);
// - threads and state from /proc/PID/stat, swap from /proc/PID/status, at the slow rate;
// - PSS from /proc/PID/smaps_rollup, which walks the page tables: every pss_interval (5 s)
//   while that costs under 0.02% of a core, less often when it would cost more; a
//   newcomer's at once and at its first slow rounds, while its memory is still settling;
//   a member whose RSS stays put in an unchanged tree keeps its last PSS up to a minute, up
//   to 5 minutes when it is the tree's only process.
// Descendants are found by a rescan, done only when /proc/loadavg says a process was
// created since the last one, reading only the processes created since (by pid when few
// were, through the RecentProcesses every kernel's probe shares, else by listing /proc). Members
// that leave (the kernel itself included) are kept with their last readings and peak.
class ProcessTreeProbe final : public Probe {
 public:
  explicit ProcessTreeProbe(const ProbeOptions& options);

  [[nodiscard]] ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;
  // Members that are gone by now (the kernel first of all) move to `departed`.
  void on_kernel_exit(const KernelExit& how) override;

  [[nodiscard]] std::vector<pid_t> members() const;
  // Forces the next sample() to rescan /proc and read the slow fields (benchmarks).
  void force_full_sample() {
    last_rescan_ms_ = -1;
    last_slow_ms_ = -1;
    last_pss_ms_ = -1;
    next_pss_after_ms_ = 0;
    last_created_pid_ = -1;
  }

  struct Readings {
    std::string comm;
    std::int64_t rss = 0;
    std::int64_t peak_rss = 0;
    std::int64_t swap = 0;
    std::int64_t pss = -1;
    std::int64_t threads = 0;
  };
  struct Departed {
    pid_t pid = 0;
    Readings last;
    std::int64_t seen_last_ms = 0;  // wall clock of the last successful reading
  };
  // The last members to leave, oldest first.
  [[nodiscard]] std::vector<Departed> departed() const;

  static constexpr std::size_t kDepartedKept = 32;

 private:
  struct Member {
    util::UniqueFd stat_fd;
    util::UniqueFd statm_fd;
    util::UniqueFd status_fd;
    std::uint64_t start_time = 0;  // guards against pid reuse
    Readings readings;
    std::int64_t seen_last_ms = 0;
    int pss_reads = 0;
    std::int64_t rss_at_pss = -1;  // its RSS when PSS was last read, and when
    std::int64_t pss_read_ms = 0;
    std::uint64_t tree_at_pss = 0;  // tree_changes_ then
  };

  void rescan_if_needed(std::int64_t now_ms);
  void rescan(pid_t created_after, pid_t newest);
  bool read_stat(pid_t pid, Member& m);
  bool read_statm(pid_t pid, Member& m);
  void read_swap(pid_t pid, Member& m);
  void read_pss(pid_t pid, Member& m, std::int64_t now_ms);
  [[nodiscard]] bool pss_settled(const Member& m, std::int64_t now_ms) const;
  void remember_departed(pid_t pid, const Member& m);
  void publish_members();

  pid_t root_;
  std::string proc_;
  std::shared_ptr<KernelProcesses> processes_;
  std::int64_t page_size_;
  std::int64_t rescan_interval_ms_;
  std::int64_t slow_interval_ms_;
  std::int64_t last_rescan_ms_ = -1;
  std::int64_t last_slow_ms_ = -1;
  std::int64_t last_pss_ms_ = -1;
  std::int64_t pss_interval_ms_;
  std::int64_t next_pss_after_ms_ = 0;  // pss_interval_ms_, or longer when costly
  // More new pids than this: list /proc instead. Each pid's answer is shared by every
  // kernel's probe (RecentProcesses), so only the first to look pays for it.
  static constexpr pid_t kRangeWalkMax = 1024;
  static constexpr std::int64_t kSlowBudgetInverse = 5000;  // 1/5000 of a core: 0.02%
  static constexpr int kNewcomerPssReads = 3;               // at the slow rate, whatever the budget
  pid_t last_created_pid_ = -1;
  std::uint64_t tree_changes_ = 0;  // members joined or left
  std::shared_ptr<RecentProcesses> recent_;
  std::unordered_map<pid_t, Member> members_;
  std::array<Departed, kDepartedKept> departed_{};
  std::size_t departed_next_ = 0;
  std::size_t departed_count_ = 0;
  bool available_ = true;
  std::string reason_;
};

}  // namespace kwd::probes::linux_proc
