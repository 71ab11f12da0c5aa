#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kwd/faulthandler/python_shim.hpp"
#include "kwd/platform/memory_limit.hpp"
#include "kwd/probes/probe.hpp"
#include "kwd/protocol/kernel_listener.hpp"
#include "kwd/supervisor/child_process.hpp"
#include "kwd/supervisor/event_loop.hpp"
#include "kwd/supervisor/run_options.hpp"
#include "kwd/supervisor/signal_pipe.hpp"
#include "kwd/supervisor/stderr_tee.hpp"
#include "kwd/timeline/timeline.hpp"

namespace kwd::supervisor {

// Launcher mode: runs one kernel as our child, watches it, writes a crash report if it dies
// without being asked to, and then ends the way the kernel ended.
class Supervisor {
 public:
  explicit Supervisor(RunOptions options);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Never returns once the kernel has started (the process ends like the kernel did);
  // returns an exit status (127, 126, 1) when it could not be started.
  int run();

 private:
  void start_kernel();
  void on_signals();
  void on_sample_tick();
  void on_kernel_stderr();
  void on_kernel_exit(const Termination& end);
  [[nodiscard]] bool death_was_requested(const Termination& end) const;
  // `end` is null for a hang report (the kernel is alive); `at_ms` is then the detection time.
  nlohmann::json build_report(const Termination* end, std::int64_t at_ms, const std::string& id);
  void write_report(const Termination* end, std::int64_t at_ms);
  void start_listening();
  void on_hang(const protocol::HangEvidence& hang);
  [[nodiscard]] std::vector<std::string> kernel_environment() const;
  void release_memory_limit();

  RunOptions options_;
  EventLoop loop_;
  std::unique_ptr<SignalPipe> signals_;
  std::unique_ptr<StderrTee> stderr_;
  std::unique_ptr<platform::KernelMemoryLimit> memory_limit_;  // before child_: outlives it
  std::optional<ChildProcess> child_;
  probes::ProbeList probes_;
  timeline::Timeline timeline_;

  std::string connection_file_;
  std::int64_t started_at_ms_ = 0;
  std::int64_t last_sample_ns_ = 0;  // steady clock; any sample, timed or not
  static constexpr std::int64_t kMinStderrSampleGapNs = 20'000'000;
  std::vector<int> received_signals_;  // termination signals sent to us
  std::optional<std::int64_t> termination_requested_ms_;
  std::optional<EventLoop::TimerId> forward_timer_;
  std::vector<std::string> notes_;  // what we could not do, said in the report too
  // sitecustomize shim that gets Python tracebacks out of a dying kernel; none with
  // --no-faulthandler or when it could not be written.
  std::optional<faulthandler::PythonShim> python_shim_;
  // IOPub + heartbeat; declared after loop_ (it unregisters from the loop when destroyed).
  std::unique_ptr<protocol::KernelListener> listener_;
};

}  // namespace kwd::supervisor
