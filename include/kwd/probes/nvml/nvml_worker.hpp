#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "kwd/probes/nvml/gpu_state.hpp"

namespace kwd::probes::nvml {

// The thread that does all NVML work, so a driver call that blocks (GPU initialisation
// without persistence mode, a GPU being reset) never stalls the event loop. It loads and
// initialises the library, samples every device at `interval` and when a cell's edge asks,
// and in between sleeps, taking the Xid events that came after each sleep
// (nvmlEventSetWait_v2 without a wait).
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
  // Xid events, for any number of readers (the probes of every watched kernel share one
  // worker): copies those after `cursor` into `into` (appended) and moves the cursor past
  // them. Returns how many the reader missed, pushed out by newer ones before it looked.
  std::uint64_t follow_xid_events(std::uint64_t& cursor, std::vector<XidEvent>& into);
  // The cursor of a reader that wants only the events from now on.
  std::uint64_t xid_events_end();
  // A cell ended: take the Xid events that came, sample now, and wait up to `wait` for a
  // sample begun after this call, so that the reading (and an Xid of that cell) is had
  // before the next cell can start and counts as this one's. True when it came. The GPU is sampled
  // on this thread at its own rate: without this, a short cell's allocation was charged to the next
  // cell (seen on an H200). `request` (when given) gets the request's number (see
  // XidEvent::served_before), whether or not the answer came in time.
  bool sample_and_wait(std::chrono::microseconds wait, std::uint64_t* request = nullptr);
  // The highest request a published sample has answered.
  std::uint64_t served();
  // Until the library is loaded and sampled once, or refused; false on timeout.
  bool wait_started(std::chrono::milliseconds timeout);
  // The thread has given up: no driver, no device, or NVML failed (the reason is in the
  // published state). A new worker may find what this one did not.
  bool unavailable();

  static constexpr std::size_t kXidKept = 64;  // the newest, for readers to follow
  static constexpr unsigned int kWaitSliceMs = 250;

 private:
  void run();
  bool stopping();  // the destructor has asked the thread to end
  // `served`: the requests (sample_and_wait) this sample answers, those made before it began.
  void publish(const GpuState& state, std::optional<std::uint64_t> served = std::nullopt);
  void note_problem(GpuState& state, std::string problem);
  void sample_devices(const NvmlLibrary& lib, std::vector<Device>& handles, GpuState& state,
                      ProcessBuffer& buffer);
  // The Xid events waiting in the set, without waiting for more.
  void take_xid_events(const NvmlLibrary& lib, EventSet events, const std::vector<Device>& handles,
                       GpuState& state, ProcessBuffer& buffer, std::vector<GpuProcess>& on_device);

  std::filesystem::path library_;
  std::chrono::milliseconds interval_;

  std::mutex mutex_;
  std::condition_variable wake_;
  GpuState published_;
  std::uint64_t generation_ = 0;
  bool started_ = false;
  std::deque<XidEvent> xid_recent_;  // the newest kXidKept
  std::uint64_t xid_end_ = 0;        // events ever seen; the last of xid_recent_ is number end-1
  // sample_and_wait's requests, numbered, and the last one a published sample answers (a
  // sample begun before a request does not): the worker's sleeps end at once while
  // requests_ != served_.
  std::uint64_t requests_ = 0;
  std::uint64_t served_ = 0;
  bool stopping_ = false;  // set by the destructor, which then joins the thread

  // Last: started after everything above exists, stopped first. A std::thread, not a
  // std::jthread: Apple's libc++ has jthread only from LLVM 20 on (before, behind
  // -fexperimental-library).
  std::thread thread_;
};

}  // namespace kwd::probes::nvml
