#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kwd/faulthandler/python_shim.hpp"
#include "kwd/launch/child_process.hpp"
#include "kwd/launch/run_options.hpp"
#include "kwd/launch/stderr_tee.hpp"
#include "kwd/loop/event_loop.hpp"
#include "kwd/loop/signal_pipe.hpp"
#include "kwd/platform/memory_limit.hpp"
#include "kwd/watch/death_policy.hpp"
#include "kwd/watch/last_words.hpp"
#include "kwd/watch/watch.hpp"

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
  void start_kernel();
  void on_signals();
  void on_kernel_stderr();
  void on_kernel_death(const watch::ProcessEnd& end, std::int64_t died_at_ms);
  void on_hang(const protocol::HangEvidence& hang);
  void look_for_kernel_stderr_pipe();
  void keep_last_words();
  // `end` is null for a hang report (the kernel is alive); `at_ms` is then the detection time.
  void write_report(const watch::ProcessEnd* end, std::int64_t at_ms);
  [[nodiscard]] std::vector<std::string> kernel_environment() const;
  void release_memory_limit();
  [[noreturn]] void end_like(const watch::ProcessEnd& end);

  RunOptions options_;
  loop::EventLoop loop_;
  std::unique_ptr<loop::SignalPipe> signals_;
  std::unique_ptr<StderrTee> stderr_;
  std::unique_ptr<platform::KernelMemoryLimit> memory_limit_;  // before child_: outlives it
  std::optional<ChildProcess> child_;
  watch::ChildDeathSource* child_death_ = nullptr;  // owned by watch_
  std::string connection_file_;
  static constexpr std::int64_t kMinStderrSampleGapNs = 20'000'000;
  static constexpr std::chrono::milliseconds kLastWordsLookInterval{100};
  static constexpr int kLastWordsMaxLooks = 600;           // a minute
  static constexpr std::size_t kLastWordsLimit = 1 << 20;  // ipykernel's pipe holds 64 KiB
  int last_words_looks_ = 0;
  watch::ReceivedSignals received_;  // signals sent to us, with when
  std::optional<loop::EventLoop::TimerId> forward_timer_;
  std::vector<std::string> notes_;  // what we could not do, said in the report too
  // sitecustomize shim that gets Python tracebacks out of a dying kernel; none with
  // --no-faulthandler or when it could not be written.
  std::optional<faulthandler::PythonShim> python_shim_;
  // A duplicate of the read end of ipykernel's own stderr pipe, drained after the death.
  std::unique_ptr<watch::LastWords> last_words_;
  std::optional<loop::EventLoop::TimerId> last_words_timer_;
  std::unique_ptr<watch::Watch> watch_;  // last: unregisters from loop_ when destroyed
};

}  // namespace kwd::launch
