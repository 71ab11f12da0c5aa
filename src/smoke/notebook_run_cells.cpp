#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kwd/diagnosis/stuck_reason.hpp"
#include "kwd/protocol/content_fields.hpp"
#include "kwd/report/terminal_text.hpp"
#include "kwd/smoke/failure_explanation.hpp"
#include "kwd/smoke/notebook_run.hpp"
#include "kwd/stacks/pure.hpp"
#include "kwd/stacks/stacks.hpp"
#include "kwd/stacks/stacks_json.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/size_parse.hpp"

// The middle phase of a notebook run: the code cells executed in order, their messages
// turned into outputs and a verdict per cell (an error, the timeout and its interrupt, a
// memory budget crossed).

namespace kwd::smoke {
namespace {

std::string traceback_text(const nlohmann::json& error) {
  std::string out;
  if (error.is_object() && error.contains("traceback") && error["traceback"].is_array())
    for (const auto& line : error["traceback"])
      if (line.is_string()) out += report::without_ansi_sequences(line.get<std::string>()) + "\n";
  return out;
}

std::optional<std::int64_t> max_known(std::optional<std::int64_t> a, std::int64_t b) {
  if (b < 0) return a;
  return a ? std::max(*a, b) : b;
}

}  // namespace

void NotebookRun::on_message(client::Channel channel, protocol::Message& m) {
  if (channel == client::Channel::iopub && kernel_) kernel_->iopub_message(m);
  if (draining_) {
    // The kernel is dead: its last outputs join its cell, and nothing moves on from here (no
    // next cell, no shutdown: the death decides what happened).
    if (channel == client::Channel::iopub && cell_ != nullptr && m.parent_msg_id == request_id_ &&
        m.msg_type != "status")
      outputs_.apply(m);
    return;
  }
  if (state_ == State::starting) {
    if (channel == client::Channel::iopub) iopub_seen_ = true;
    if (channel == client::Channel::shell && m.msg_type == "kernel_info_reply")
      kernel_info_seen_ = true;
    if (kernel_info_seen_) on_kernel_info_reply();
    return;
  }
  if (channel == client::Channel::iopub && m.msg_type == "update_display_data") {
    outputs_.apply_update(m);
    return;
  }
  if (channel == client::Channel::control && m.msg_type == "interrupt_reply" &&
      !interrupt_id_.empty() && m.parent_msg_id == interrupt_id_) {
    interrupt_id_.clear();
    // The reply may come after the interrupted cell's own end: the cell it was sent for.
    if (interrupted_cell_ && *interrupted_cell_ < result_.cells.size())
      result_.cells[*interrupted_cell_].message += "; the kernel acknowledged it";
    return;
  }
  if (cell_ == nullptr || m.parent_msg_id != request_id_) return;
  if (channel == client::Channel::shell && m.msg_type == "execute_reply") {
    reply_ = m.content;
    reply_seen_ = true;
    outputs_.record_timing("shell.execute_reply", m.date_us);
  } else if (channel == client::Channel::iopub && m.msg_type == "status") {
    const std::string state = protocol::text_field(m.content, "execution_state");
    if (state == "idle") idle_seen_ = true;
    if (state == "busy" || state == "idle")
      outputs_.record_timing(state == "busy" ? "iopub.status.busy" : "iopub.status.idle",
                             m.date_us);
  } else if (channel == client::Channel::iopub) {
    if (m.msg_type == "execute_input") outputs_.record_timing("iopub.execute_input", m.date_us);
    outputs_.apply(m);
  }
  maybe_finish_cell();
}

void NotebookRun::mark_rest_not_run(const std::string& why) {
  for (auto& cell : result_.cells) {
    if (cell.status != CellStatus::not_run || !cell.message.empty()) continue;
    cell.message = why;
  }
}

void NotebookRun::next_cell() {
  cell_ = nullptr;
  code_ = nullptr;
  while (next_ < notebook_.code_cells.size()) {
    const CodeCell& code = notebook_.code_cells[next_];
    CellResult& cell = result_.cells[next_];
    ++next_;
    if (stop_) continue;  // said by mark_rest_not_run
    if (code.tagged("skip-execution") || code.tagged("nbval-skip")) {
      cell.status = CellStatus::skipped;
      cell.message = code.tagged("skip-execution") ? "tagged skip-execution" : "tagged nbval-skip";
      continue;
    }
    cell_ = &cell;
    code_ = &code;
    break;
  }
  if (cell_ == nullptr) {
    shut_down();
    return;
  }
  outputs_.begin(code_->index);
  reply_seen_ = idle_seen_ = false;
  reply_ = nullptr;
  cell_started_ns_ = util::steady_ns();
  request_id_ = client_->send(client::Channel::shell, "execute_request",
                              {{"code", code_->source},
                               {"silent", false},
                               {"store_history", true},
                               {"user_expressions", nlohmann::json::object()},
                               {"allow_stdin", false},
                               {"stop_on_error", false}});
  const double timeout = cell_timeout_s();
  if (timeout > 0)
    deadline_ = loop_.after(std::chrono::milliseconds(static_cast<long>(timeout * 1000)),
                            [this] { on_cell_timeout(); });
}

double NotebookRun::cell_timeout_s() const {
  // An explicit --timeout wins over the notebook's metadata (nbmake's order); 0 is none.
  return options_.timeout_s.value_or(notebook_.timeout_s.value_or(300.0));
}

void NotebookRun::sample_peaks() {
  if (!kernel_ || !kernel_->started()) return;
  const auto* latest = kernel_->watch().timeline().latest();
  if (latest == nullptr) return;
  result_.peak_rss = max_known(result_.peak_rss, latest->rss);
  result_.peak_gpu = max_known(result_.peak_gpu, latest->gpu_used);
  if (cell_ == nullptr) return;
  cell_->peak_rss = max_known(cell_->peak_rss, latest->rss);
  cell_->peak_gpu = max_known(cell_->peak_gpu, latest->gpu_used);
}

void NotebookRun::maybe_finish_cell() {
  if (!reply_seen_ || !idle_seen_ || cell_ == nullptr) return;
  if (deadline_) loop_.cancel(*deadline_);
  deadline_.reset();
  sample_peaks();
  CellResult& cell = *cell_;
  cell.seconds = seconds_since(cell_started_ns_);
  const bool interrupted = state_ == State::interrupting;
  if (interrupted) {
    state_ = State::running;  // the timeout failed it already
  } else {
    const std::string status = protocol::text_field(reply_, "status");
    const bool errors_allowed = options_.allow_errors || notebook_.allow_errors.value_or(false) ||
                                code_->tagged("raises-exception") ||
                                code_->tagged("nbval-raises-exception");
    if (status == "ok" || (status == "error" && errors_allowed)) {
      cell.status = CellStatus::passed;
    } else {
      const nlohmann::json& error =
          outputs_.last_error().is_object() ? outputs_.last_error() : reply_;
      cell.status = CellStatus::failed;
      cell.failure_type = status == "error" ? protocol::text_field(error, "ename", "Error")
                                            : "execute_reply status '" + status + "'";
      cell.message = status == "error"
                         ? cell.failure_type + ": " + protocol::text_field(error, "evalue")
                         : "the kernel answered '" + status + "'";
      cell.details = traceback_text(error);
      if (status == "error")
        explain_failure(cell, error, outputs_.stream_text("stderr"), kernel_->watch());
      stop_ = true;
      mark_rest_not_run("an earlier cell failed (cell " + std::to_string(cell.number) + ")");
    }
  }
  // Budgets: the first cell that crosses one fails for it; the rest keep running.
  auto over = [](const std::optional<std::int64_t>& peak,
                 const std::optional<std::uint64_t>& budget) {
    return peak && budget && static_cast<std::uint64_t>(*peak) > *budget;
  };
  if (!budget_tripped_ && cell.status == CellStatus::passed) {
    const bool rss = over(cell.peak_rss, options_.max_rss);
    const bool gpu = over(cell.peak_gpu, options_.max_gpu);
    if (rss || gpu) {
      budget_tripped_ = true;
      cell.status = CellStatus::failed;
      cell.failure_type = "memory budget";
      const auto peak = rss ? *cell.peak_rss : *cell.peak_gpu;
      const auto budget = rss ? *options_.max_rss : *options_.max_gpu;
      cell.message = std::string(rss ? "peak RSS " : "peak GPU memory ") +
                     util::format_bytes(static_cast<double>(peak)) + " is over the " +
                     (rss ? "--max-rss " : "--max-gpu ") +
                     util::format_bytes(static_cast<double>(budget)) + " budget";
    }
  }
  next_cell();
}

void NotebookRun::on_cell_timeout() {
  deadline_.reset();
  if (cell_ == nullptr || state_ != State::running) return;
  const double timeout = cell_timeout_s();
  CellResult& cell = *cell_;
  cell.status = CellStatus::failed;
  cell.failure_type = "timeout";
  cell.message = "still running after the " + format_seconds(timeout) + " cell timeout";
  // Where it is stuck, before the interrupt moves it. Bounded, as the loop waits.
  stuck_at_timeout_.clear();
  if (kernel_ && kernel_->pid() > 0) {
    stacks::CaptureOptions capture;
    capture.python_budget = std::chrono::milliseconds(500);
    capture.native_budget = std::chrono::milliseconds(2000);
    try {
      cell.stacks = stacks::capture_stacks(kernel_->pid(), capture);
      const auto where = stacks::main_thread_summary(*cell.stacks);
      if (const auto why = diagnosis::stuck_reason(stacks::to_json(*cell.stacks)))
        stuck_at_timeout_ =
            ", " + why->text + (where.empty() ? "" : " (main thread " + where + ")");
      else if (!where.empty())
        stuck_at_timeout_ = ", stuck " + where;
      cell.message += stuck_at_timeout_;
      cell.details = stacks::render_text(*cell.stacks);
    } catch (const std::exception& e) {  // the timeout still interrupts, without them
      cell.stacks.reset();
      spdlog::warn("{}: no stacks at the cell timeout: {}", notebook_.path.string(), e.what());
    }
  }
  cell.message += "; ";
  stop_ = true;
  mark_rest_not_run("an earlier cell timed out (cell " + std::to_string(cell.number) + ")");
  state_ = State::interrupting;
  // As the kernelspec says: a kernel that cannot take SIGINT (its interrupt_mode is
  // "message") is asked on the control channel, and says when it has interrupted.
  if (protocol::text_field(spec_.spec, "interrupt_mode", "signal") == "message") {
    interrupted_cell_ = static_cast<std::size_t>(&cell - result_.cells.data());
    interrupt_id_ =
        client_->send(client::Channel::control, "interrupt_request", nlohmann::json::object());
    cell.message += "interrupted with an interrupt_request (the kernelspec's interrupt_mode)";
  } else {
    kernel_->send_signal(SIGINT);
    cell.message += "interrupted with SIGINT";
  }
  deadline_ = loop_.after(
      std::chrono::milliseconds(static_cast<long>(options_.interrupt_grace_s * 1000)), [this] {
        deadline_.reset();
        if (state_ != State::interrupting) return;
        // What the stacks said at the timeout stays the message's point: an interrupt that
        // cannot end the cell is common exactly where a cell is stuck for good (a DataLoader
        // joining a stopped worker as it unwinds, a read from a process that never writes).
        cell_->message =
            "still running after the cell timeout and an interrupt; killed" +
            (stuck_at_timeout_.empty() ? std::string() : ":" + stuck_at_timeout_.substr(1));
        kernel_failed(cell_->message, nullptr, util::wall_ms());
      });
}

}  // namespace kwd::smoke
