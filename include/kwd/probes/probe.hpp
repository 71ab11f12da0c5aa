#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "kwd/timeline/memory_sample.hpp"

namespace kwd::probes {

// What a probe could see, said once (report field `probes`).
struct ProbeStatus {
  std::string name;
  bool available = false;
  std::string reason;  // why not, or what it is reading
};

// One source of memory facts (a platform API, a vendor library). The sampler asks each
// probe to fill the fields it can see; a probe never throws out of sample().
class Probe {
 public:
  virtual ~Probe() = default;
  [[nodiscard]] virtual ProbeStatus status() const = 0;
  virtual void sample(timeline::MemorySample& into) = 0;
  // Facts beyond the timeline (devices, counters, log lines) for the crash report.
  virtual void contribute(nlohmann::json& report) const;
  // Called once when the kernel has died, before contribute(): a last look at counters.
  virtual void on_kernel_exit() {}
};

struct ProbeOptions {
  pid_t kernel_pid = -1;
  std::chrono::milliseconds tree_rescan_interval{1000};
  std::chrono::milliseconds slow_interval{1000};  // PSS and swap, costlier to read
  std::chrono::milliseconds gpu_interval{500};
  std::filesystem::path nvml_library;  // empty: the default search
  std::string cgroup_path;             // the kernel's own cgroup when the watchdog made one
};

using ProbeList = std::vector<std::unique_ptr<Probe>>;

// The probes for this platform (one folder each under src/probes/) plus vendor probes.
ProbeList make_probes(const ProbeOptions& options);
// Implemented once per platform folder.
ProbeList make_platform_probes(const ProbeOptions& options);

}  // namespace kwd::probes
