#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "kwd/probes/nvml/gpu_state.hpp"

namespace kwd::probes::nvml {

// The thread that does all NVML work, so a driver call that blocks (GPU initialisation
// without persistence mode, a GPU being reset) never stalls the event loop. It loads and
// initialises the library, samples every device at `interval`, and in between waits for
// Xid events (nvmlEventSetWait_v2, in slices short enough to notice a stop request).
// Results are handed to the loop under a mutex: the loop copies the state when it changed
// and takes the queued Xid events on its sample tick.
class NvmlWorker {
 public:
  NvmlWorker(std::filesystem::path library, std::chrono::milliseconds interval);
  ~NvmlWorker();  // asks the thread to stop and joins it (at most one wait slice)
  NvmlWorker(const NvmlWorker&) = delete;
  NvmlWorker& operator=(const NvmlWorker&) = delete;

  // Copies the state into `into` if it changed since `generation` (updated); true if so.
  bool copy_if_newer(std::uint64_t& generation, GpuState& into);
  // Moves the queued Xid events into `into` (appended).
  void take_xid_events(std::vector<XidEvent>& into);
  // Until the library is loaded and sampled once, or refused; false on timeout.
  bool wait_started(std::chrono::milliseconds timeout);

  static constexpr std::size_t kXidQueued = 64;
  static constexpr unsigned int kWaitSliceMs = 250;

 private:
  void run(const std::stop_token& stop);
  void publish(const GpuState& state);
  void note_problem(GpuState& state, std::string problem);
  void sample_devices(const NvmlLibrary& lib, std::vector<Device>& handles, GpuState& state,
                      ProcessBuffer& buffer);

  std::filesystem::path library_;
  std::chrono::milliseconds interval_;

  std::mutex mutex_;
  std::condition_variable_any wake_;
  GpuState published_;
  std::uint64_t generation_ = 0;
  bool started_ = false;
  std::vector<XidEvent> xid_queue_;
  std::uint64_t xid_dropped_ = 0;

  std::jthread thread_;  // last: started after everything above exists, stopped first
};

}  // namespace kwd::probes::nvml
