#pragma once

#include <mach/mach.h>

#include <cstdint>
#include <string>

#include "kwd/probes/probe.hpp"

namespace kwd::probes::darwin {

// The whole Mac: host_statistics64(HOST_VM_INFO64) page counts, hw.memsize, vm.swapusage
// and kern.memorystatus_vm_pressure_level (1 normal, 2 warning, 4 critical: the level at
// which jetsam starts killing), read at the slow rate.
class VmPressureProbe final : public Probe {
 public:
  explicit VmPressureProbe(const ProbeOptions& options);
  ~VmPressureProbe() override;
  VmPressureProbe(const VmPressureProbe&) = delete;
  VmPressureProbe& operator=(const VmPressureProbe&) = delete;

  [[nodiscard]] ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;
  void on_kernel_exit(const KernelExit& how) override;

 private:
  void read_now();

  mach_port_t host_;  // a send right to the host port, released on destruction
  std::int64_t interval_ms_;
  std::int64_t last_read_ms_ = -1;
  std::int64_t mem_total_ = -1, available_ = -1, compressed_ = -1, wired_ = -1;
  std::int64_t swap_total_ = -1, swap_used_ = -1;
  int pressure_level_ = 0;
  bool ok_ = false;
};

}  // namespace kwd::probes::darwin
