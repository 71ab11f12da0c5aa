#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kwd/probes/probe.hpp"

namespace kwd::probes::darwin {

struct IoKitLibrary;

// Apple GPUs share the system's memory. Each IOAccelerator service in the I/O Registry
// publishes a "PerformanceStatistics" dictionary with "In use system memory", "Alloc
// system memory" and "Device Utilization %" (what Activity Monitor's GPU history reads).
// Read at the GPU rate; a Mac without an accelerator reports that, and nothing else changes.
// I/O Kit and Core Foundation are opened at run time (io_kit_library.hpp).
class IoAcceleratorProbe final : public Probe {
 public:
  explicit IoAcceleratorProbe(const ProbeOptions& options);

  [[nodiscard]] ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;

 private:
  struct Accelerator {
    std::string io_class;  // e.g. AGXAcceleratorG13X
    std::int64_t in_use_system_memory = -1;
    std::int64_t alloc_system_memory = -1;
    std::int64_t device_utilization_percent = -1;
  };
  void read_now();

  const IoKitLibrary* lib_;  // nullptr: not opened, problem_ says why
  std::int64_t interval_ms_;
  std::int64_t last_read_ms_ = -1;
  std::vector<Accelerator> accelerators_;
  std::int64_t peak_in_use_ = -1;
  std::string problem_;
};

}  // namespace kwd::probes::darwin
