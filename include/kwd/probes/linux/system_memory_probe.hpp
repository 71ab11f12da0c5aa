#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kwd/probes/probe.hpp"

namespace kwd::probes::linux_proc {

class SystemMemoryReader;

// The whole machine: MemTotal, MemAvailable and swap from /proc/meminfo, memory pressure
// from /proc/pressure/memory, through the process's one SystemMemoryReader, re-read at the
// slow rate; every sample carries the last values.
class SystemMemoryProbe final : public Probe {
 public:
  explicit SystemMemoryProbe(const ProbeOptions& options);
  ~SystemMemoryProbe() override;
  SystemMemoryProbe(const SystemMemoryProbe&) = delete;
  SystemMemoryProbe& operator=(const SystemMemoryProbe&) = delete;

  [[nodiscard]] ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;
  void on_kernel_exit(const KernelExit& how) override;

 private:
  std::shared_ptr<SystemMemoryReader> reader_;
  std::int64_t interval_ms_;
  std::string reason_;
};

}  // namespace kwd::probes::linux_proc
