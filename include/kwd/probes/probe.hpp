#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "kwd/probes/host_sources.hpp"
#include "kwd/probes/kernel_processes.hpp"
#include "kwd/timeline/memory_sample.hpp"

namespace kwd::probes {

// What a probe could see, said once (report field `probes`).
struct ProbeStatus {
  std::string name;
  bool available = false;
  std::string reason;  // why not, or what it is reading
};

// How the kernel ended, as far as a probe needs to know: a SIGKILL makes the OOM-killer
// probes look a little longer for their evidence.
struct KernelExit {
  bool signaled = false;
  int signal = 0;
};

// One source of memory facts (a platform API, a vendor library). The sampler asks each
// probe to fill the fields it can see; a probe never throws out of sample().
class Probe {
 public:
  virtual ~Probe() = default;
  [[nodiscard]] virtual ProbeStatus status() const = 0;
  // Called on every sample tick, on the event loop's thread; must not block. A probe with a
  // costlier source reads it at its own lower rate and carries its last value forward.
  virtual void sample(timeline::MemorySample& into) = 0;
  // Facts beyond the timeline (devices, counters, log lines) for the crash report. Probes
  // write their own sections and read no other's: what the facts add up to is decided by
  // the diagnosis alone.
  virtual void contribute(nlohmann::json& report) const;
  // Called once when the kernel has died unasked, before contribute(): a last look at
  // counters and logs.
  virtual void on_kernel_exit(const KernelExit& /*how*/) {}
  // The kernel has begun to die (faulthandler is writing its dump) but still lives for a
  // moment: the last chance to read what only a live process shows.
  virtual void on_kernel_dying() {}
  // A front end is about to read contribute() while the kernel lives (a cell failed and it
  // asks why): a probe that reads its source at its own slower rate reads it now.
  virtual void catch_up() {}
  // A cell started (`running`) or ended at `at_ms` (the kernel's clock): a probe whose source
  // is read at a slower rate of its own reads it now. With `sampled`, a sample is being
  // taken for the edge; without, one was a moment ago (a flood of tiny executions), and the
  // probe may ask but not wait.
  virtual void on_cell_edge(bool /*running*/, std::int64_t /*at_ms*/, bool /*sampled*/) {}
};

struct ProbeOptions {
  pid_t kernel_pid = -1;
  std::chrono::milliseconds tree_rescan_interval{1000};
  std::chrono::milliseconds slow_interval{1000};  // swap, threads, limits: costlier to read
  // PSS walks the page tables: a settled process's is read this often at most (newcomers'
  // at the slow rate while their memory settles).
  std::chrono::milliseconds pss_interval{5000};
  std::chrono::milliseconds gpu_interval{500};
  std::filesystem::path nvml_library;  // empty: the default search (libnvidia-ml.so.1)
  std::string cgroup_path;             // the kernel's own cgroup when the watchdog made one
  std::string proc_root = "/proc";
  // Where the DRM probe finds proc/<pid>/fdinfo, sys/bus/pci/devices and dev/dri: "/" on a
  // live machine, a fixture tree in tests.
  std::filesystem::path drm_root = "/";
  // Who belongs to the kernel, shared by the probes that must attribute what they see;
  // make_probes() creates it when left empty.
  std::shared_ptr<KernelProcesses> processes;
  // Host-wide sources shared with other watches of this process (the daemon's); null: each
  // probe makes its own.
  std::shared_ptr<HostSources> host;
};

using ProbeList = std::vector<std::unique_ptr<Probe>>;

// The probes for this platform (one folder each under src/probes/) plus vendor probes.
// The process-tree probe comes first: it updates `processes` before the others read it.
ProbeList make_probes(ProbeOptions options);
// Implemented once per platform folder.
ProbeList make_platform_probes(const ProbeOptions& options);

}  // namespace kwd::probes
