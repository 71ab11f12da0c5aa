#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "kwd/client/kernel_client.hpp"
#include "kwd/kernelspec/kernelspec.hpp"
#include "kwd/launch/watched_kernel.hpp"
#include "kwd/loop/event_loop.hpp"
#include "kwd/smoke/cell_outputs.hpp"
#include "kwd/smoke/notebook.hpp"
#include "kwd/smoke/results.hpp"
#include "kwd/smoke/smoke_options.hpp"
#include "kwd/util/private_files.hpp"

namespace kwd::smoke {

// One notebook, top to bottom, in a fresh kernel under watch, on the caller's loop (so that
// `-j N` runs N of them in one thread): start the kernel, wait until it answers, execute
// the code cells in order, collect their outputs, and say per cell what happened. A kernel
// that dies or hangs fails its cell with the crash report's cause.
class NotebookRun {
 public:
  // Private directories "<prefix><pid>-<random>" in $TMPDIR; a runner sweeps those of dead
  // pids (killed with SIGKILL) when it starts.
  static constexpr std::string_view kRunDirPrefix = "kernel-watchdog-smoke-";
  // How many times a kernel that lost a port at start is started again (lost_a_port_at_start).
  static constexpr int kMaxPortRetries = 2;
  using DoneHandler = std::function<void()>;

  // `host_sources` is shared by every notebook of the run: one kernel log reader and one
  // NVML thread (started once, not per notebook) whatever -j says.
  NotebookRun(loop::EventLoop& loop, zmq::context_t& zmq, const SmokeOptions& options,
              std::shared_ptr<probes::HostSources> host_sources, Notebook notebook,
              kernelspec::Kernelspec spec, std::string executed_name, DoneHandler on_done);
  ~NotebookRun();
  NotebookRun(const NotebookRun&) = delete;
  NotebookRun& operator=(const NotebookRun&) = delete;

  // Variables the kernel is started with beyond its kernelspec's (which they override):
  // set before start().
  void set_environment(std::vector<std::string> entries) { environment_ = std::move(entries); }
  void start();
  // A SIGCHLD arrived (for some child of ours).
  void check_death();
  [[nodiscard]] bool done() const { return state_ == State::done; }
  [[nodiscard]] const NotebookResult& result() const { return result_; }
  // The kernel's process tree's resident memory at the last sample; 0 before the first.
  [[nodiscard]] std::int64_t current_rss() const;
  // `-j auto` stops it to run it again later: its kernel is killed, and its end reports
  // nothing and writes no executed notebook (on_done is still called, once it is dead).
  void stop_to_run_again();
  [[nodiscard]] bool stopped_to_run_again() const { return stopped_to_run_again_; }
  // What is running now, for a progress line: "cell 4/12 (31 s)".
  [[nodiscard]] std::string progress() const;

 private:
  enum class State { starting, running, interrupting, shutting_down, done };

  // Starting (notebook_run_start.cpp): the kernel up, the shell and IOPub answering.
  [[nodiscard]] std::vector<std::string> kernel_argv(const std::string& connection_file) const;
  void prepare_connection();
  void on_kernel_info_reply();
  void never_started(const std::string& why);

  // The cells (notebook_run_cells.cpp), one at a time.
  void on_message(client::Channel channel, protocol::Message& message);
  void next_cell();
  void maybe_finish_cell();
  void on_cell_timeout();
  void sample_peaks();
  [[nodiscard]] double cell_timeout_s() const;
  void mark_rest_not_run(const std::string& why);

  // The end (notebook_run.cpp): a death, a hang, or the shutdown after the last cell.
  void on_kernel_death(const watch::ProcessEnd& end, std::int64_t at_ms);
  // The kernel died before it answered, of a port another process took between our choosing
  // it and its binding it (ports are chosen as jupyter_client does: bind 0, read, close).
  [[nodiscard]] bool lost_a_port_at_start() const;
  // ipykernel 6 and 7 do not die of it when the lost port is not the first they bind: the
  // traceback is printed and the interpreter then waits for ever in its exit (zmq_ctx_term, on
  // the sockets already bound). Such a kernel is ended, a moment after the error, so that its
  // death starts it again.
  void end_a_kernel_stuck_after_a_lost_port();
  void start_again();
  void on_hang();
  void kernel_failed(const std::string& cell_verdict, const watch::ProcessEnd* end,
                     std::int64_t at_ms);
  void shut_down();
  void finish();
  void write_executed_notebook();
  void cancel_timers();
  void remove_run_dir();
  // The kernel (killed if it lives), its client, timers and connection directory: at the end,
  // and before a start again.
  void drop_kernel();

  // "12.3 s", as the run's messages say a duration; seconds since a util::steady_ns().
  static std::string format_seconds(double s);
  static double seconds_since(std::int64_t start_ns);

  loop::EventLoop& loop_;
  zmq::context_t& zmq_;
  const SmokeOptions& options_;
  std::shared_ptr<probes::HostSources> host_sources_;
  Notebook notebook_;
  kernelspec::Kernelspec spec_;
  std::string executed_name_;
  DoneHandler on_done_;
  NotebookResult result_;
  State state_ = State::starting;

  std::optional<util::SafeDir> temp_dir_;  // $TMPDIR, checked
  std::optional<util::SafeDir> run_dir_;   // in it: the connection file (the key)
  protocol::ConnectionInfo connection_;
  std::string connection_file_;
  std::unique_ptr<launch::WatchedKernel> kernel_;
  std::unique_ptr<client::KernelClient> client_;
  CellOutputs outputs_;
  std::vector<std::string> environment_;  // NAME=VALUE, set_environment()

  bool kernel_info_seen_ = false;
  bool iopub_seen_ = false;
  std::size_t next_ = 0;        // next code cell to consider
  CellResult* cell_ = nullptr;  // the cell executing now
  const CodeCell* code_ = nullptr;
  std::string request_id_;
  std::string interrupt_id_;  // the interrupt_request sent on control, when the spec says so
  std::optional<std::size_t> interrupted_cell_;  // the cell it was sent for, in result_.cells
  // Where the stacks at the cell's timeout said it was stuck (", waiting for ... (main thread
  // in ...)"), kept for the message should the interrupt fail and the kernel be killed.
  std::string stuck_at_timeout_;
  bool reply_seen_ = false;
  bool idle_seen_ = false;
  nlohmann::json reply_;
  bool stop_ = false;            // an earlier cell failed: the rest do not run
  bool budget_tripped_ = false;  // only the first cell over a budget fails for it
  bool we_ended_it_ = false;     // shutdown or kill asked by us: its death is no crash
  bool stopped_to_run_again_ = false;
  bool draining_ = false;  // the kernel died: reading its last messages, nothing sent
  std::int64_t started_ns_ = 0;
  std::int64_t cell_started_ns_ = 0;
  std::optional<loop::EventLoop::TimerId> deadline_;
  std::optional<loop::EventLoop::TimerId> retry_;
  std::optional<loop::EventLoop::TimerId> peaks_timer_;
  std::optional<loop::EventLoop::TimerId> shutdown_timer_;
  std::optional<loop::EventLoop::TimerId> restart_timer_;
  int port_retries_ = 0;                // starts again after a lost port (lost_a_port_at_start)
  std::int64_t lost_port_seen_ns_ = 0;  // when a living kernel's stderr first said so
};

}  // namespace kwd::smoke
