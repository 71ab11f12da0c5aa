#include "kwd/smoke/notebook_run.hpp"

#include <signal.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "kwd/report/html_page.hpp"
#include "kwd/report/terminal_summary.hpp"
#include "kwd/stacks/pure.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/json_text.hpp"
#include "kwd/util/private_files.hpp"

// A notebook run: made, torn down, and its end (a death, a hang, the shutdown once the last
// cell ran). Its phases before that live beside this file: notebook_run_start.cpp starts the
// kernel and waits until it answers, notebook_run_cells.cpp executes the cells.

namespace kwd::smoke {

std::string NotebookRun::format_seconds(double s) {
  return fmt::format("{:.3g} s", s);
}

double NotebookRun::seconds_since(std::int64_t start_ns) {
  return static_cast<double>(util::steady_ns() - start_ns) / 1e9;
}

NotebookRun::NotebookRun(loop::EventLoop& loop, zmq::context_t& zmq, const SmokeOptions& options,
                         std::shared_ptr<probes::HostSources> host_sources, Notebook notebook,
                         kernelspec::Kernelspec spec, std::string executed_name,
                         DoneHandler on_done)
    : loop_(loop),
      zmq_(zmq),
      options_(options),
      host_sources_(std::move(host_sources)),
      notebook_(std::move(notebook)),
      spec_(std::move(spec)),
      executed_name_(std::move(executed_name)),
      on_done_(std::move(on_done)),
      outputs_(notebook_.document["cells"]) {
  result_.path = notebook_.path;
  result_.kernel_name = spec_.name;
  result_.warnings = notebook_.warnings;
  for (const auto& code : notebook_.code_cells) {
    CellResult cell;
    cell.number = code.number;
    cell.first_line = code.first_line();
    result_.cells.push_back(std::move(cell));
  }
}

NotebookRun::~NotebookRun() {
  drop_kernel();
}

void NotebookRun::drop_kernel() {
  cancel_timers();
  client_.reset();
  if (kernel_ && kernel_->started() && !kernel_->dead()) kernel_->send_signal(SIGKILL);
  kernel_.reset();  // its memory limit is released with it
  remove_run_dir();
}

void NotebookRun::remove_run_dir() {
  if (run_dir_ && temp_dir_) temp_dir_->remove_tree(run_dir_->path().filename().string());
  run_dir_.reset();
}

void NotebookRun::cancel_timers() {
  for (auto* timer : {&deadline_, &retry_, &peaks_timer_, &shutdown_timer_, &restart_timer_}) {
    if (*timer) loop_.cancel(**timer);
    timer->reset();
  }
}

bool NotebookRun::lost_a_port_at_start() const {
  // As jupyter_client's restarter does (random_ports_until_alive): only a kernel that never
  // answered, and only for this error, and only a few times.
  return state_ == State::starting && !kernel_info_seen_ && port_retries_ < kMaxPortRetries &&
         kernel_ &&
         kernel_->stderr_tail().contents().find("Address already in use") != std::string::npos;
}

void NotebookRun::end_a_kernel_stuck_after_a_lost_port() {
  if (!lost_a_port_at_start() || !kernel_->started() || kernel_->dead()) return;
  // A kernel that dies of it on its own (its first bind failed) is given the moment to.
  constexpr std::int64_t kGraceNs = 1'000'000'000;
  const auto now = util::steady_ns();
  if (lost_port_seen_ns_ == 0) lost_port_seen_ns_ = now;
  if (now - lost_port_seen_ns_ < kGraceNs) return;
  spdlog::info("{}: the kernel that could not bind its port has not exited; ending it",
               notebook_.path.string());
  kernel_->send_signal(SIGKILL);  // its death (on_kernel_death) starts it again
}

void NotebookRun::start_again() {
  drop_kernel();
  lost_port_seen_ns_ = 0;
  kernel_info_seen_ = false;
  iopub_seen_ = false;
  draining_ = false;
  start();
}

void NotebookRun::on_hang() {
  if (state_ == State::done || state_ == State::shutting_down || we_ended_it_) return;
  kernel_failed("the kernel stopped answering heartbeats", nullptr, util::wall_ms());
}

void NotebookRun::on_kernel_death(const watch::ProcessEnd& end, std::int64_t at_ms) {
  if (we_ended_it_ || state_ == State::shutting_down) {
    finish();
    return;
  }
  if (lost_a_port_at_start()) {
    ++port_retries_;
    spdlog::warn(
        "{}: the kernel could not bind a port another process took first (Address "
        "already in use); starting it again on new ports ({} of {})",
        notebook_.path.string(), port_retries_, kMaxPortRetries);
    // Not from inside the kernel's own death callback, which start_again() would destroy.
    restart_timer_ = loop_.after(std::chrono::milliseconds(0), [this] {
      restart_timer_.reset();
      start_again();
    });
    return;
  }
  kernel_failed(end.status ? "the kernel " + end.status->describe() : "the kernel ended", &end,
                at_ms);
}

void NotebookRun::kernel_failed(const std::string& verdict, const watch::ProcessEnd* end,
                                std::int64_t at_ms) {
  if (state_ == State::done) return;
  const bool hang = end == nullptr;
  if (cell_ != nullptr) cell_->seconds = seconds_since(cell_started_ns_);
  result_.outcome = Outcome::died;
  nlohmann::json sections = nlohmann::json::object();
  if (state_ == State::starting)
    // It never became ready: the report says what it was waiting for, and for how long.
    sections["startup"] = {{"kernel_name", spec_.name},
                           {"timeout_s", options_.startup_timeout_s},
                           {"kernel_info_answered", kernel_info_seen_},
                           {"iopub_seen", iopub_seen_}};
  auto written = kernel_->write_report(end, at_ms, (options_.output_dir / "reports").string(), {},
                                       std::move(sections));
  kernel_->release_memory_limit();
  const auto& diagnosis = written.document["diagnosis"];
  result_.cause =
      diagnosis.is_object() ? diagnosis.value("cause", std::string("unknown")) : "unknown";
  result_.headline = diagnosis.is_object() ? diagnosis.value("headline", verdict) : verdict;
  if (hang && result_.headline.empty()) result_.headline = verdict;
  try {
    result_.summary = report::render_summary(written.document, report::SummaryStyle{});
  } catch (const std::exception& e) {
    result_.summary = std::string("(no summary: ") + e.what() + ")";
  }
  if (written.path) {
    result_.report = written.path;
    try {
      const auto id = written.path->stem().string();
      result_.report_html = util::SafeDir::open(written.path->parent_path())
                                .write_file(id + ".html", report::render_html(written.document),
                                            0600, util::Replace::kNever);
    } catch (const std::exception& e) {
      spdlog::warn("{}: no HTML page for the report: {}", notebook_.path.string(), e.what());
    }
  }
  if (cell_ != nullptr && !(hang && cell_->failure_type == "timeout")) {
    cell_->status = CellStatus::failed;
    cell_->failure_type = result_.cause;
    cell_->message = result_.headline;
  }
  if (cell_ != nullptr) {
    // A cell that timed out keeps where it was stuck under the report's summary.
    cell_->details = result_.summary;
    if (cell_->stacks) cell_->details += "\n" + stacks::render_text(*cell_->stacks);
  }
  stop_ = true;
  mark_rest_not_run(cell_ != nullptr ? "the kernel " + std::string(hang ? "hung" : "died") +
                                           " in cell " + std::to_string(cell_->number)
                                     : "the kernel " + std::string(hang ? "never answered"
                                                                        : "died while starting"));
  cell_ = nullptr;
  cancel_timers();
  if (kernel_->dead()) {
    finish();
    return;
  }
  // Alive but of no use (hung, never ready): killed, and its death is then ours.
  we_ended_it_ = true;
  state_ = State::shutting_down;
  kernel_->send_signal(SIGKILL);
}

void NotebookRun::shut_down() {
  state_ = State::shutting_down;
  we_ended_it_ = true;
  client_->send(client::Channel::control, "shutdown_request", {{"restart", false}});
  // A kernel that does not leave when asked is made to (as jupyter_client does).
  shutdown_timer_ = loop_.after(std::chrono::seconds(5), [this] {
    kernel_->send_signal(SIGTERM);
    shutdown_timer_ = loop_.after(std::chrono::seconds(5), [this] {
      shutdown_timer_.reset();
      kernel_->send_signal(SIGKILL);
    });
  });
}

std::int64_t NotebookRun::current_rss() const {
  if (!kernel_ || !kernel_->started()) return 0;
  const auto* latest = kernel_->watch().timeline().latest();
  return latest != nullptr && latest->rss > 0 ? latest->rss : 0;
}

void NotebookRun::stop_to_run_again() {
  if (state_ == State::done) return;
  stopped_to_run_again_ = true;
  we_ended_it_ = true;
  state_ = State::shutting_down;
  cancel_timers();
  client_.reset();  // what the kernel still says is of no use now
  if (kernel_ && kernel_->started() && !kernel_->dead())
    kernel_->send_signal(SIGKILL);
  else
    finish();
}

void NotebookRun::check_death() {
  if (kernel_ && state_ != State::done) kernel_->check_death();
}

void NotebookRun::finish() {
  if (state_ == State::done) return;
  state_ = State::done;
  cancel_timers();
  // The kernel is gone (or never started): its memory cgroup goes now, not at our exit.
  if (kernel_) kernel_->release_memory_limit();
  result_.seconds = seconds_since(started_ns_);
  if (!stopped_to_run_again_) {
    if (result_.outcome == Outcome::passed && result_.first_failure() != nullptr)
      result_.outcome = Outcome::failed;
    write_executed_notebook();
  }
  remove_run_dir();
  // Told from the loop, not from inside a handler of this run's own sockets or timers.
  loop_.after(std::chrono::milliseconds(0), [this] { on_done_(); });
}

void NotebookRun::write_executed_notebook() {
  try {
    // Written as it is made: a notebook of large outputs is not held a second time as text.
    result_.executed = util::SafeDir::open_private(options_.output_dir)
                           .write_file(
                               executed_name_,
                               [this](const util::WriteBytes& write) {
                                 util::write_json_text(notebook_.document, 1, write);
                                 write("\n");
                               },
                               0644, util::Replace::kAllowed, util::Durability::kAtomicOnly);
  } catch (const std::exception& e) {
    spdlog::error("{}: cannot write the executed notebook: {}", notebook_.path.string(), e.what());
  }
}

std::string NotebookRun::progress() const {
  if (state_ == State::starting) return "starting the kernel";
  if (cell_ == nullptr) return "finishing";
  return "cell " + std::to_string(cell_->number) + "/" + std::to_string(result_.cells.size()) +
         " (" + format_seconds(seconds_since(cell_started_ns_)) + ")";
}

}  // namespace kwd::smoke
