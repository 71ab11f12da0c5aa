#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "kwd/probes/drm/sysfs_device.hpp"
#include "kwd/probes/kernel_processes.hpp"
#include "kwd/probes/probe.hpp"

namespace kwd::probes::drm {

// AMD and Intel GPUs (and any DRM driver that follows Documentation/gpu/drm-usage-stats.rst)
// through the files the kernel already keeps: the DRM descriptors of the kernel's processes
// (/proc/<pid>/fdinfo) say what memory and engine time each client holds, and sysfs says the
// device's totals. No vendor library is loaded, nothing is opened on /dev/dri. Reads happen
// on the loop at the GPU rate (a few small files per DRM descriptor); the report section is
// `drm_gpu`, the NVIDIA one's shape with source "drm-fdinfo", and the kernel's device memory
// joins NVML's in the samples (gpu_used), so status, metrics and the JupyterLab status bar
// show it as they show NVIDIA's.
class DrmProbe final : public Probe {
 public:
  explicit DrmProbe(const ProbeOptions& options);

  [[nodiscard]] ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;
  void on_kernel_dying() override { read(); }
  void catch_up() override { read(); }
  void on_cell_edge(bool running, std::int64_t at_ms, bool sampled) override;

  // Reads the descriptors and devices now (the sampler does at the GPU rate).
  void read();

  static constexpr std::size_t kProcessesKept = 64;
  static constexpr std::size_t kDevicesKept = 16;

 private:
  struct Tracked {
    pid_t pid = 0;
    std::size_t device = 0;
    std::uint64_t used = 0;    // device-local memory (VRAM) at the last read
    std::uint64_t system = 0;  // system memory the GPU maps (GTT, system regions)
    std::uint64_t peak_used = 0;
    std::map<std::string, std::uint64_t> regions;
    std::map<std::string, std::uint64_t> engine_ns;
    std::map<std::string, std::uint64_t> cycles;
    std::map<std::string, std::uint64_t> total_cycles;
    std::vector<std::uint64_t> client_ids;
    std::int64_t last_seen_ms = 0;
  };

  std::size_t device_index(const std::string& driver, const std::string& pdev);

  std::filesystem::path root_;
  std::shared_ptr<KernelProcesses> processes_;
  std::chrono::milliseconds interval_;
  std::int64_t last_read_ms_ = -1;  // steady clock
  std::int64_t sampled_at_ms_ = 0;  // wall clock of the last read
  std::vector<DrmDevice> devices_;  // in the order first seen; their index is the report's
  std::vector<Tracked> tracked_;    // (pid, device) pairs seen, ours
  std::size_t descriptors_ = 0, duplicates_ = 0;  // at the last read
  std::vector<std::string> problems_;             // each distinct one once
  bool seen_any_ = false;
  bool dev_dri_ = false;  // <root>/dev/dri exists: this machine has DRM devices
};

}  // namespace kwd::probes::drm
