#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kwd/probes/kernel_processes.hpp"
#include "kwd/probes/probe.hpp"

namespace kwd::probes::linux_proc {

class KernelLogFeed;

// Evidence that the OOM killer killed the kernel or one of its own. A SIGKILL alone proves
// nothing (anyone may send one); the evidence is a kernel log line naming a pid of the
// kernel's tree, or a rise of the OOM-kill counter of the kernel's cgroup (which the cgroup
// probe, listed before this one, puts in the report's `cgroup` section).
//
// The kernel log is a KernelLogFeed shared by every watch of the process (one /dev/kmsg
// descriptor for a daemon's hundred kernels): this probe follows it from the moment it was
// made, once a second and in full when the kernel dies. After a SIGKILL it waits for the
// line, which the kernel prints just after sending the signal, only when the machine's count
// of OOM kills says a kill's line is still to come (KernelLogFeed::oom_kills_counted): a
// SIGKILL from anyone else is reported at once.
class OomKillerProbe final : public Probe {
 public:
  explicit OomKillerProbe(const ProbeOptions& options, const std::string& kmsg_path = "/dev/kmsg");
  ~OomKillerProbe() override;
  OomKillerProbe(const OomKillerProbe&) = delete;
  OomKillerProbe& operator=(const OomKillerProbe&) = delete;

  [[nodiscard]] ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;
  void on_kernel_exit(const KernelExit& how) override;
  void catch_up() override;

  [[nodiscard]] const std::vector<pid_t>& killed_pids() const { return killed_pids_; }

  static constexpr std::size_t kLinesKept = 32;

 private:
  // Follows the feed (reading the kernel log first if the last read is older than the
  // interval, or at once when `now`); true if a new line named a kill in the kernel's tree.
  bool drain(bool now);
  [[nodiscard]] bool ours(pid_t pid) const;
  // A "Killed process" line names the kernel's own pid.
  [[nodiscard]] bool root_named() const;

  std::shared_ptr<KernelLogFeed> feed_;
  std::uint64_t cursor_ = 0;
  std::shared_ptr<KernelProcesses> processes_;
  // The hierarchy path of the cgroup the watchdog made for the kernel alone: a process the
  // tree probe never saw (born and killed between two scans) is still ours if the kernel's
  // "oom-kill:" summary puts it there.
  std::string exclusive_cgroup_path_;
  std::vector<pid_t> adopted_;      // such processes, at most kLinesKept
  std::vector<std::string> lines_;  // matching messages, at most kLinesKept (the first ones)
  std::vector<pid_t> killed_pids_;  // from "Killed process" lines naming the tree
  std::int64_t other_kills_ = 0;    // kills of processes outside the tree, seen meanwhile
  std::int64_t lost_before_ = 0;    // the feed's count of lost records when we started
  std::int64_t missed_ = 0;         // lines other kernels' reads pushed out before ours
  std::int64_t interval_ms_;
  std::string reason_;
  // At a SIGKILL: OOM kills counted whose line was not read yet, and how long the report
  // waited for the log (nullopt: it had no cause to look).
  std::optional<std::int64_t> kills_unlogged_at_death_;
  std::optional<std::int64_t> kernel_rss_at_kill_;  // from the line that killed the root
  std::optional<std::int64_t> waited_for_kernel_log_ms_;
};

}  // namespace kwd::probes::linux_proc
