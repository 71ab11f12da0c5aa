#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kwd/probes/kernel_processes.hpp"
#include "kwd/probes/probe.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::probes::linux_proc {

// Evidence that the OOM killer killed the kernel or one of its own. A SIGKILL alone proves
// nothing (anyone may send one); the evidence is a kernel log line naming a pid of the
// kernel's tree, or a rise of the OOM-kill counter of the kernel's cgroup (which the cgroup
// probe, listed before this one, puts in the report's `cgroup` section).
//
// /dev/kmsg is opened non-blocking and positioned at its end, so only what the kernel logs
// from now on is read: once a second what arrived is drained (a read() that returns EAGAIN
// when nothing did), and everything when the kernel dies. After a SIGKILL it waits briefly for the
// line, which the kernel prints just after sending the signal.
class OomKillerProbe final : public Probe {
 public:
  explicit OomKillerProbe(const ProbeOptions& options, const std::string& kmsg_path = "/dev/kmsg");

  [[nodiscard]] ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;
  void on_kernel_exit(const KernelExit& how) override;

  [[nodiscard]] const std::vector<pid_t>& killed_pids() const { return killed_pids_; }

  static constexpr std::size_t kLinesKept = 32;

 private:
  // Reads every record available now; true if one named a kill in the kernel's tree.
  bool drain();
  [[nodiscard]] bool ours(pid_t pid) const;

  util::UniqueFd kmsg_;
  std::shared_ptr<KernelProcesses> processes_;
  // The hierarchy path of the cgroup the watchdog made for the kernel alone: a process the
  // tree probe never saw (born and killed between two scans) is still ours if the kernel's
  // "oom-kill:" summary puts it there.
  std::string exclusive_cgroup_path_;
  std::vector<pid_t> adopted_;      // such processes, at most kLinesKept
  std::vector<std::string> lines_;  // matching messages, at most kLinesKept (the first ones)
  std::vector<pid_t> killed_pids_;  // from "Killed process" lines naming the tree
  std::int64_t other_kills_ = 0;    // kills of processes outside the tree, seen meanwhile
  std::int64_t records_lost_ = 0;   // overwritten before we read them
  std::int64_t interval_ms_;
  std::int64_t last_drain_ms_ = -1;
  std::string reason_;
};

}  // namespace kwd::probes::linux_proc
