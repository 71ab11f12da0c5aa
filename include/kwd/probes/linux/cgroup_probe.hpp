#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kwd/probes/linux/cgroup_fs.hpp"
#include "kwd/probes/linux/pressure.hpp"
#include "kwd/probes/linux/process_neighbours.hpp"
#include "kwd/probes/probe.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::probes::linux_proc {

// The kernel's memory cgroup, v2 or v1: usage every sample while a limit is in force (one
// pread of a file kept open; at the slow rate without one), and at the slow rate the limit
// in force (the tightest along the path up to the
// hierarchy's top), the high-water mark, the event counters (v2 memory.events, v1
// memory.oom_control and memory.failcnt) and the cgroup's memory.pressure where there is
// one. The OOM-kill counter is read when the kernel starts and again after it died; when it
// rose, the other processes in the cgroup are listed (who else held the memory).
class CgroupProbe final : public Probe {
 public:
  explicit CgroupProbe(const ProbeOptions& options);

  [[nodiscard]] ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;
  void on_kernel_exit(const KernelExit& how) override;

  // The counter as last read; nullopt when this kernel has no readable counter.
  [[nodiscard]] std::optional<std::int64_t> oom_kill_count() const;

 private:
  void read_slow();
  std::optional<std::int64_t> read_oom_kill() const;

  std::optional<MemoryCgroup> cgroup_;
  bool created_by_watchdog_ = false;
  std::string pressure_file_;  // empty: none separate from the system's
  // Kept open and re-read with pread: opening cgroupfs files costs more than reading them.
  util::UniqueFd usage_fd_;
  struct LimitFile {
    std::string dir;
    util::UniqueFd fd;
  };
  std::vector<LimitFile> limit_files_;  // the cgroup's and every ancestor's, up to the top
  util::UniqueFd events_fd_;            // v2 memory.events, v1 memory.oom_control
  util::UniqueFd failcnt_fd_;           // v1 memory.failcnt
  util::UniqueFd peak_fd_;              // v2 memory.peak, v1 memory.max_usage_in_bytes
  util::UniqueFd pressure_fd_;
  std::int64_t interval_ms_;
  std::int64_t last_slow_ms_ = -1;

  std::int64_t usage_ = -1;
  std::optional<std::int64_t> limit_;
  std::string limit_set_at_;  // the cgroup whose limit is the tightest
  std::optional<std::int64_t> max_usage_;
  std::map<std::string, std::int64_t> events_;
  std::optional<Pressure> pressure_;
  std::optional<std::int64_t> oom_kill_before_;
  std::optional<std::int64_t> oom_kill_after_;
  std::shared_ptr<KernelProcesses> processes_;
  std::string proc_root_;
  std::optional<std::vector<Neighbour>> neighbours_;  // looked for only after an OOM kill
  std::string reason_;
};

}  // namespace kwd::probes::linux_proc
