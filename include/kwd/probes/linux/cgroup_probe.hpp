#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kwd/probes/linux/cgroup_reader.hpp"
#include "kwd/probes/linux/process_neighbours.hpp"
#include "kwd/probes/probe.hpp"

namespace kwd::probes::linux_proc {

// The kernel's memory cgroup, v2 or v1 (read through a CgroupReader shared by every kernel
// in that cgroup): usage every sample while a limit is in force (one pread of a file kept
// open; at the slow rate without one), and at the slow rate the limit in force (the
// tightest along the path up to the hierarchy's top), the high-water mark, the event
// counters (v2 memory.events, v1 memory.oom_control and memory.failcnt) and the cgroup's
// memory.pressure where there is one. The OOM-kill counter is read when the kernel starts
// and again after it died; when it rose, the other processes in the cgroup are listed (who
// else held the memory).
class CgroupProbe final : public Probe {
 public:
  explicit CgroupProbe(const ProbeOptions& options);
  ~CgroupProbe() override;

  [[nodiscard]] ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;
  void on_kernel_exit(const KernelExit& how) override;

  // The counter as last read; nullopt when this kernel has no readable counter.
  [[nodiscard]] std::optional<std::int64_t> oom_kill_count() const;

 private:
  std::optional<std::int64_t> read_oom_kill() const;

  std::shared_ptr<CgroupReader> reader_;  // null: no readable memory cgroup
  bool created_by_watchdog_ = false;
  std::int64_t interval_ms_;
  std::optional<std::int64_t> oom_kill_before_;
  std::optional<std::int64_t> oom_kill_after_;
  std::shared_ptr<KernelProcesses> processes_;
  std::string proc_root_;
  std::optional<std::vector<Neighbour>> neighbours_;  // looked for only after an OOM kill
  std::string reason_;
};

}  // namespace kwd::probes::linux_proc
