#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "kwd/kernelspec/kernelspec.hpp"
#include "kwd/loop/event_loop.hpp"
#include "kwd/probes/host_sources.hpp"
#include "kwd/smoke/admission.hpp"
#include "kwd/smoke/notebook.hpp"
#include "kwd/smoke/notebook_run.hpp"
#include "kwd/smoke/results.hpp"
#include "kwd/smoke/smoke_options.hpp"

namespace kwd::smoke {

// The notebooks of one smoke run, on one loop: which starts when (Admission), and, under
// `-j auto`, what their kernels hold as they run: a notebook whose memory would push the
// kernels together past the budget is stopped before the OOM killer acts and run again
// alone, as is one the OOM killer took while others ran beside it, and one whose framework
// could not get GPU memory while others held the same GPU (an allocation is refused at once:
// no sampling sees it coming).
class SuiteSchedule {
 public:
  struct Entry {
    Notebook notebook;
    kernelspec::Kernelspec spec;
    std::string executed_name;
    Job job;  // job.index is the entry's place in the plan
  };
  // Each notebook's final result, told in the plan's order as soon as those before it are.
  using ResultHandler = std::function<void(const NotebookResult&)>;

  SuiteSchedule(loop::EventLoop& loop, zmq::context_t& zmq, const SmokeOptions& options,
                std::shared_ptr<probes::HostSources> host_sources, std::vector<Entry> entries,
                std::optional<std::int64_t> budget, std::size_t ceiling, std::vector<SmokeGpu> gpus,
                ResultHandler on_result, std::function<void()> on_all_done);
  ~SuiteSchedule();
  SuiteSchedule(const SuiteSchedule&) = delete;
  SuiteSchedule& operator=(const SuiteSchedule&) = delete;

  void start();
  // A SIGCHLD arrived.
  void check_death();
  // The first notebook still running, for a progress line; nullptr when none.
  [[nodiscard]] const NotebookRun* first_running() const;
  // Every notebook's result, in the plan's order (those that never ended are not run).
  [[nodiscard]] std::vector<NotebookResult> results() const;

 private:
  struct Slot {
    Entry entry;
    std::unique_ptr<NotebookRun> run;
    std::int64_t queued_ns = 0;
    std::int64_t started_ns = 0;
    double waited_s = 0;
    bool packed = false;             // another notebook ran beside this start of it
    bool stopping = false;           // stopped by us to run again: its end is not its result
    bool oom_ran_again = false;      // an OOM kill beside others was not counted, once
    bool shared_gpu = false;         // another notebook ran on its GPU beside this start of it
    bool gpu_oom_ran_again = false;  // a GPU allocation refused beside others, once
    std::optional<std::int64_t> admitted_estimate;
    std::optional<std::size_t> gpu;        // where this start of it was placed
    std::optional<NotebookResult> result;  // once it stands
    std::vector<std::string> requeues;
  };

  void start_more();
  void launch(Job job, std::optional<std::size_t> gpu);
  void on_run_done(std::size_t index);
  void run_again(Slot& slot, std::string why);
  void watch_memory();
  [[nodiscard]] std::vector<RunningJob> running() const;
  [[nodiscard]] bool oom_kill_of_ours(const Slot& slot) const;
  [[nodiscard]] bool gpu_oom_of_ours(const Slot& slot) const;

  loop::EventLoop& loop_;
  zmq::context_t& zmq_;
  const SmokeOptions& options_;
  std::shared_ptr<probes::HostSources> host_sources_;
  Admission admission_;
  ResultHandler on_result_;
  std::function<void()> on_all_done_;
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<NotebookRun>> retired_;  // stopped runs: kept until the end
  std::size_t told_ = 0;                               // results told, in plan order
  std::string last_wait_;
  std::optional<loop::EventLoop::TimerId> memory_timer_;
};

}  // namespace kwd::smoke
