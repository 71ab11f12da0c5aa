#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kwd/launch/live_status_file.hpp"
#include "kwd/launch/run_options.hpp"
#include "kwd/launch/watched_kernel.hpp"
#include "kwd/loop/event_loop.hpp"
#include "kwd/loop/signal_pipe.hpp"
#include "kwd/watch/death_policy.hpp"
#include "kwd/watch/flight_recorder.hpp"

namespace kwd::launch {

// Launcher mode (`run`): starts one kernel as our child under the transparency contract,
// composes a Watch over it, writes a report if it dies without being asked to, and then
// ends the way the kernel ended.
class Launcher {
 public:
  explicit Launcher(RunOptions options);
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Never returns once the kernel has started (the process ends like the kernel did);
  // returns an exit status (127, 126, 1) when it could not be started.
  int run();

 private:
  void on_signals();
  void on_kernel_death(const watch::ProcessEnd& end, std::int64_t died_at_ms);
  [[noreturn]] void end_like(const watch::ProcessEnd& end);

  RunOptions options_;
  loop::EventLoop loop_;
  std::unique_ptr<loop::SignalPipe> signals_;
  watch::ReceivedSignals received_;  // signals sent to us, with when
  // SIGUSR2 came: the kernel's manager is ending the kernel (the Python provisioner says so
  // before jupyter_client's shutdown interrupts it), so whatever end follows was asked for.
  bool manager_is_ending_kernel_ = false;
  std::optional<loop::EventLoop::TimerId> forward_timer_;
  std::optional<LiveStatusFile> live_status_;
  // Its record in the store, for the death that takes this process with the kernel.
  std::optional<watch::FlightRecorder> flight_;
  std::unique_ptr<WatchedKernel> kernel_;  // last: unregisters from loop_ when destroyed
};

}  // namespace kwd::launch
