#include "kwd/smoke/notebook_run.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cmath>

#include "kwd/protocol/content_fields.hpp"
#include "kwd/report/html_page.hpp"
#include "kwd/report/terminal_summary.hpp"
#include "kwd/report/terminal_text.hpp"
#include "kwd/smoke/failure_explanation.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/errno_text.hpp"
#include "kwd/util/json_text.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/util/size_parse.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::smoke {
namespace {

// Output of a notebook may be large (a 50 MB image in one display_data); the watchdog's
// own listener keeps its tighter caps.
protocol::WireLimits client_limits() {
  protocol::WireLimits limits;
  limits.max_frame_bytes = 512u << 20;
  limits.max_message_bytes = 1024u << 20;
  return limits;
}

// Free TCP ports on the loopback, chosen as jupyter_client does (bind to port 0, read it,
// close); all are held until all are chosen so that none is chosen twice.
std::vector<int> free_loopback_ports(std::size_t count) {
  std::vector<util::UniqueFd> held;
  std::vector<int> ports;
  for (std::size_t i = 0; i < count; ++i) {
    util::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd)
      throw std::runtime_error(util::cannot("create", "a socket to find a free port", errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error("cannot find a free port on 127.0.0.1");
    ports.push_back(ntohs(addr.sin_port));
    held.push_back(std::move(fd));
  }
  return ports;
}

std::string format_seconds(double s) {
  return fmt::format("{:.3g} s", s);
}

double seconds_since(std::int64_t start_ns) {
  return static_cast<double>(util::steady_ns() - start_ns) / 1e9;
}

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
  cancel_timers();
  client_.reset();
  if (kernel_ && kernel_->started() && !kernel_->dead()) kernel_->send_signal(SIGKILL);
  kernel_.reset();
  remove_run_dir();
}

void NotebookRun::remove_run_dir() {
  if (run_dir_ && temp_dir_) temp_dir_->remove_tree(run_dir_->path().filename().string());
  run_dir_.reset();
}

void NotebookRun::cancel_timers() {
  for (auto* timer : {&deadline_, &retry_, &peaks_timer_, &shutdown_timer_}) {
    if (*timer) loop_.cancel(**timer);
    timer->reset();
  }
}

namespace {

// `python -m ipykernel_launcher` (or `-m ipykernel`), as kernelspecs have it: IPython's
// options apply. A kernel started otherwise may reject an option it does not know.
bool runs_ipykernel(const std::vector<std::string>& argv) {
  for (std::size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == "-m" && (argv[i + 1] == "ipykernel_launcher" || argv[i + 1] == "ipykernel"))
      return true;
  return false;
}

}  // namespace

std::vector<std::string> NotebookRun::kernel_argv(const std::string& connection_file) const {
  std::vector<std::string> argv;
  for (const auto& a : spec_.spec["argv"])
    if (a.is_string()) argv.push_back(a.get<std::string>());
  // A spec made by `kernelspec wrap` already runs under `kernel-watchdog run --`: this run
  // watches the kernel itself, so only the kernel's own command is used.
  if (spec_.wrapped())
    if (const auto dashes = std::find(argv.begin(), argv.end(), "--"); dashes != argv.end())
      argv.erase(argv.begin(), dashes + 1);
  for (auto& a : argv) {
    for (const auto& [field, value] :
         {std::pair<std::string, std::string>{"{connection_file}", connection_file},
          {"{resource_dir}", spec_.dir.string()}}) {
      for (auto at = a.find(field); at != std::string::npos; at = a.find(field, at + value.size()))
        a.replace(at, field.size(), value);
    }
  }
  if (!options_.ipython_history.empty() && runs_ipykernel(argv) &&
      std::none_of(argv.begin(), argv.end(), [](const std::string& a) {
        return a.starts_with("--HistoryManager.hist_file");
      }))
    argv.push_back("--HistoryManager.hist_file=" + options_.ipython_history);
  return argv;
}

void NotebookRun::prepare_connection() {
  // The connection file holds the key: a directory of ours with a random name, created
  // relative to the shared one's descriptor; removed when the run ends.
  temp_dir_.emplace(util::SafeDir::open(util::shared_temp_dir()));
  run_dir_.emplace(
      temp_dir_->make_unique_dir(std::string(kRunDirPrefix) + std::to_string(::getpid()) + "-"));
  const auto ports = free_loopback_ports(5);
  connection_.transport = protocol::Transport::tcp;
  connection_.ip = "127.0.0.1";
  connection_.shell_port = ports[0];
  connection_.iopub_port = ports[1];
  connection_.stdin_port = ports[2];
  connection_.control_port = ports[3];
  connection_.hb_port = ports[4];
  connection_.signature_scheme = "hmac-sha256";
  connection_.key = protocol::Secret(util::random_name(48));
  const std::string kernel_id = util::random_name(12);
  nlohmann::json file = {
      {"shell_port", ports[0]},    {"iopub_port", ports[1]},
      {"stdin_port", ports[2]},    {"control_port", ports[3]},
      {"hb_port", ports[4]},       {"ip", connection_.ip},
      {"transport", "tcp"},        {"signature_scheme", "hmac-sha256"},
      {"kernel_name", spec_.name}, {"key", std::string(connection_.key.reveal())}};
  connection_file_ = run_dir_
                         ->write_file("kernel-" + kernel_id + ".json", file.dump(), 0600,
                                      util::Replace::kAllowed, util::Durability::kAtomicOnly)
                         .string();
}

void NotebookRun::never_started(const std::string& why) {
  result_.outcome = Outcome::died;
  result_.cause = "kernel_start_failed";
  result_.headline = why;
  mark_rest_not_run("the kernel never started");
  finish();
}

void NotebookRun::start() {
  started_ns_ = util::steady_ns();
  launch::KernelLaunch launch;
  try {
    prepare_connection();
    launch.argv = kernel_argv(connection_file_);
  } catch (const std::exception& e) {
    never_started(std::string("could not prepare the kernel's connection: ") + e.what());
    return;
  }
  launch.connection_file = connection_file_;
  launch.mode = "smoke";
  launch.working_dir =
      (options_.cwd.empty() ? std::filesystem::absolute(notebook_.path).parent_path()
                            : options_.cwd)
          .string();
  launch.passthrough = false;
  launch.memory_limit = options_.memory_limit;
  launch.nvml_library = options_.nvml_library;
  launch.host_sources = host_sources_;
  launch.faulthandler = options_.faulthandler;
  // One IOPub subscription: this client's; the watch gets every message from it.
  launch.listener.client_iopub_drain = [this](std::chrono::milliseconds quiet,
                                              std::chrono::milliseconds budget) {
    draining_ = true;
    if (client_) client_->drain_iopub(quiet, budget);
  };
  launch.listener.client_iopub_dropped = [this]() -> const protocol::DropCounts* {
    return client_ ? &client_->drops() : nullptr;
  };
  if (spec_.spec.contains("env") && spec_.spec["env"].is_object())
    for (const auto& [name, value] : spec_.spec["env"].items())
      if (value.is_string())
        launch.extra_environment.push_back(name + "=" + value.get<std::string>());
  kernel_ = std::make_unique<launch::WatchedKernel>(loop_, std::move(launch));
  try {
    kernel_->start(
        [this](const watch::ProcessEnd& end, std::int64_t at) { on_kernel_death(end, at); },
        [this](const protocol::HangEvidence&) { on_hang(); });
  } catch (const std::exception& e) {
    never_started(std::string("the kernel could not be started: ") + e.what());
    return;
  }
  try {
    client_ = std::make_unique<client::KernelClient>(
        zmq_, loop_, connection_, client_limits(),
        [this](client::Channel channel, protocol::Message& m) { on_message(channel, m); });
  } catch (const std::exception& e) {
    kernel_failed(std::string("the watchdog could not connect to the kernel: ") + e.what(), nullptr,
                  util::wall_ms());
    return;
  }
  client_->send(client::Channel::shell, "kernel_info_request", nlohmann::json::object());
  deadline_ = loop_.after(
      std::chrono::milliseconds(static_cast<long>(options_.startup_timeout_s * 1000)), [this] {
        deadline_.reset();
        kernel_failed("the kernel did not answer within the " +
                          format_seconds(options_.startup_timeout_s) + " startup timeout",
                      nullptr, util::wall_ms());
      });
  peaks_timer_ = loop_.every(std::chrono::milliseconds(100), [this] { sample_peaks(); });
}

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

void NotebookRun::on_kernel_info_reply() {
  // The reply says shell works; IOPub is connected once something came through it (its
  // busy/idle around the request). Until then, ask again: a SUB socket that joined late
  // missed them, and would miss the first cell's outputs the same way.
  if (!iopub_seen_) {
    if (!retry_)
      retry_ = loop_.after(std::chrono::milliseconds(100), [this] {
        retry_.reset();
        if (state_ == State::starting)
          client_->send(client::Channel::shell, "kernel_info_request", nlohmann::json::object());
      });
    return;
  }
  if (deadline_) loop_.cancel(*deadline_);
  deadline_.reset();
  state_ = State::running;
  next_cell();
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
  cell.message = "still running after the " + format_seconds(timeout) + " cell timeout; ";
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
        cell_->message = "still running after the cell timeout and an interrupt; killed";
        kernel_failed(cell_->message, nullptr, util::wall_ms());
      });
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
  kernel_failed(end.status ? "the kernel " + end.status->describe() : "the kernel ended", &end,
                at_ms);
}

void NotebookRun::kernel_failed(const std::string& verdict, const watch::ProcessEnd* end,
                                std::int64_t at_ms) {
  if (state_ == State::done) return;
  const bool hang = end == nullptr;
  if (cell_ != nullptr) cell_->seconds = seconds_since(cell_started_ns_);
  result_.outcome = Outcome::died;
  auto written = kernel_->write_report(end, at_ms, (options_.output_dir / "reports").string(), {});
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
  if (cell_ != nullptr) cell_->details = result_.summary;
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
  if (result_.outcome == Outcome::passed && result_.first_failure() != nullptr)
    result_.outcome = Outcome::failed;
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
  remove_run_dir();
  // Told from the loop, not from inside a handler of this run's own sockets or timers.
  loop_.after(std::chrono::milliseconds(0), [this] { on_done_(); });
}

std::string NotebookRun::progress() const {
  if (state_ == State::starting) return "starting the kernel";
  if (cell_ == nullptr) return "finishing";
  return "cell " + std::to_string(cell_->number) + "/" + std::to_string(result_.cells.size()) +
         " (" + format_seconds(seconds_since(cell_started_ns_)) + ")";
}

}  // namespace kwd::smoke
