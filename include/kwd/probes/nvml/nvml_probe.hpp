#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "kwd/probes/kernel_processes.hpp"
#include "kwd/probes/nvml/nvml_worker.hpp"
#include "kwd/probes/probe.hpp"

namespace kwd::probes::nvml {

// NVIDIA GPUs through NVML, loaded with dlopen (no CUDA at build time). The library is
// --nvml-library, else $KERNEL_WATCHDOG_NVML, else the dynamic linker's libnvidia-ml.so.1;
// "no NVIDIA driver" and "no NVIDIA GPU" are normal states, reported as such. All NVML
// calls happen on NvmlWorker's thread, one for the whole process (a HostSources source when
// watches share them); on the loop this probe only copies what the worker published and
// attributes it to the kernel's processes.
class NvmlProbe final : public Probe {
 public:
  explicit NvmlProbe(const ProbeOptions& options);

  [[nodiscard]] ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;
  void on_kernel_exit(const KernelExit& how) override;
  void on_cell_edge(bool running, std::int64_t at_ms, bool sampled) override;

  // Tests and benchmarks: until the worker has loaded the library (or failed to).
  bool wait_started(std::chrono::milliseconds timeout) { return worker_->wait_started(timeout); }

  // The library a run uses: the option, else the environment, else the default search.
  static std::filesystem::path library_path(const std::filesystem::path& option);

  static constexpr std::size_t kXidKept = 64;
  static constexpr std::size_t kProcessesKept = 64;
  static constexpr std::size_t kOtherProcessesReported = 8;
  // How long the loop waits at a cell's end for the worker's reading (one NVML sample takes
  // about 0.2 ms on an H100/H200); a worker caught in a slow driver call is not waited for.
  static constexpr std::chrono::microseconds kEdgeWait{2000};
  // At the death the worker's look is what catches the Xid of the fault that killed the
  // kernel: waited for longer, since it usually answers at once and a busy machine (or a
  // driver slow to answer) must not lose the cause. Only a kernel on a GPU waits at all.
  static constexpr std::chrono::microseconds kDeathWait{50'000};

 private:
  struct TrackedProcess {
    unsigned int pid = 0;
    unsigned int device = 0;
    std::optional<unsigned long long> used_memory;  // at the last sample it was seen
    unsigned long long peak_used_memory = 0;
    std::int64_t last_seen_ms = 0;
  };
  struct RecordedXid {
    std::int64_t t_ms = 0;
    unsigned long long xid = 0;
    unsigned int device = 0;
    std::optional<pid_t> pid;  // the kernel's process on that device, when there was one
  };

  // Copies what the worker published, and the Xid events it took.
  void refresh();
  [[nodiscard]] nlohmann::json other_processes() const;
  void attribute(const XidEvent& event);

  std::filesystem::path library_;  // empty: libnvidia-ml.so.1 from the linker's search
  std::shared_ptr<KernelProcesses> processes_;
  std::shared_ptr<NvmlWorker> worker_;  // shared by every watch of the process
  std::uint64_t generation_ = 0;
  std::uint64_t xid_cursor_ = 0;
  GpuState state_;
  std::vector<XidEvent> incoming_;
  std::vector<TrackedProcess> tracked_;  // the kernel's processes seen on a GPU
  std::vector<RecordedXid> xids_;
  std::uint64_t xids_dropped_ = 0;
  std::int64_t gpu_used_ = -1, gpu_device_used_ = -1, gpu_total_ = -1;
  // Cell ends' requests to the worker not yet answered, oldest first: an Xid event taken
  // before an end's answer is counted as the cell of the oldest such end (placed just before
  // it), though taken after the next cell began, as in a "run all" where cells are
  // milliseconds apart. Oldest, because a worker slow to answer (a loaded machine) serves
  // several ends with one look, and that look's events are no later cell's any more than
  // the first's: a fault the kernel went on from must not pass for the dying cell's.
  struct EndAsked {
    std::uint64_t request = 0;
    std::int64_t placed_at_ms = 0;
  };
  static constexpr std::size_t kEndsPending = 64;
  std::deque<EndAsked> ends_asked_;
};

}  // namespace kwd::probes::nvml
