#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kwd/probes/linux/pressure.hpp"
#include "kwd/probes/probe.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::probes::linux_proc {

// The whole machine: MemTotal, MemAvailable and swap from /proc/meminfo, memory pressure
// from /proc/pressure/memory. Both files stay open and are re-read with pread at the
// slow rate; every sample carries the last values.
class SystemMemoryProbe final : public Probe {
 public:
  explicit SystemMemoryProbe(const ProbeOptions& options);

  [[nodiscard]] ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;
  void on_kernel_exit(const KernelExit& how) override;

 private:
  void read_now();

  util::UniqueFd meminfo_fd_;
  util::UniqueFd pressure_fd_;
  std::int64_t interval_ms_;
  std::int64_t last_read_ms_ = -1;
  std::int64_t mem_total_ = -1, mem_available_ = -1, swap_total_ = -1, swap_free_ = -1;
  std::optional<Pressure> pressure_;
  std::string reason_;
};

}  // namespace kwd::probes::linux_proc
