#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kwd/probes/kernel_processes.hpp"
#include "kwd/probes/probe.hpp"

namespace kwd::probes::darwin {

// The kernel and its descendants on macOS: proc_listpids(PROC_PPID_ONLY) for the tree and
// proc_pid_rusage(RUSAGE_INFO_V4) for each member: resident size, phys_footprint (what
// jetsam judges by, and which counts the process's Metal/GPU buffers in unified memory)
// and the lifetime maximum footprint.
class TaskMemoryProbe final : public Probe {
 public:
  explicit TaskMemoryProbe(const ProbeOptions& options);

  [[nodiscard]] ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;
  void on_kernel_exit(const KernelExit& how) override;

 private:
  struct Readings {
    std::int64_t resident = 0;
    std::int64_t footprint = 0;
    std::int64_t lifetime_max_footprint = 0;
    std::int64_t peak_resident = 0;
  };
  void rescan();
  static bool read(pid_t pid, Readings& r);

  pid_t root_;
  std::shared_ptr<KernelProcesses> processes_;
  std::int64_t rescan_interval_ms_;
  std::int64_t last_rescan_ms_ = -1;
  std::map<pid_t, Readings> members_;
  std::vector<std::pair<pid_t, Readings>> departed_;  // the last kDepartedKept
  bool available_ = true;
  std::string reason_;

  static constexpr std::size_t kDepartedKept = 32;
};

}  // namespace kwd::probes::darwin
