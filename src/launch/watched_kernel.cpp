#include "kwd/launch/watched_kernel.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kwd/diagnosis/signature_table.hpp"
#include "kwd/launch/death_notice.hpp"
#include "kwd/launch/python_startup.hpp"
#include "kwd/platform/descriptors.hpp"
#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/stacks/stacks_json.hpp"
#include "kwd/stacks/system_crash_report.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/self_exe.hpp"
#include "kwd/util/size_parse.hpp"
#include "kwd/watch/report_writer.hpp"

extern char** environ;

namespace kwd::launch {

WatchedKernel::WatchedKernel(loop::EventLoop& loop, KernelLaunch launch)
    : loop_(loop), launch_(std::move(launch)) {}

WatchedKernel::~WatchedKernel() {
  if (stderr_) loop_.unwatch_fd(stderr_->fd());
  if (fault_read_) loop_.unwatch_fd(fault_read_.get());
  if (crash_socket_) loop_.unwatch_fd(crash_socket_.get());
  if (last_words_timer_) loop_.cancel(*last_words_timer_);
  if (system_report_timer_) loop_.cancel(*system_report_timer_);
  watch_.reset();
  // smoke's kernels lead their own group: nothing they started outlives them.
  if (child_) child_->kill_group_leftovers(dead_);
  release_memory_limit();
}

std::vector<std::string> WatchedKernel::environment() const {
  std::vector<std::string> env;
  auto overridden = [this](const char* entry) {
    if (std::strncmp(entry, "JPY_PARENT_PID=", 15) == 0) return true;
    for (const auto& extra : launch_.extra_environment) {
      const auto eq = extra.find('=');
      if (std::strncmp(entry, extra.c_str(), eq + 1) == 0) return true;
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e)
    if (!overridden(*e)) env.emplace_back(*e);
  for (const auto& extra : launch_.extra_environment)
    env.push_back(extra);
  // ipykernel watches this pid and exits when it goes away: that must be us, the process
  // the kernel manager knows.
  env.push_back("JPY_PARENT_PID=" + std::to_string(::getpid()));
  if (python_shim_) python_shim_->apply(env);
  return env;
}

void WatchedKernel::start(DeathHandler on_death, HangHandler on_hang) {
  on_death_ = std::move(on_death);
  stderr_ = std::make_unique<StderrTee>(launch_.stderr_buffer_bytes, launch_.passthrough);
  SpawnRequest request;
  request.argv = launch_.argv;
  request.working_dir = launch_.working_dir;
  if (launch_.memory_limit) {
    std::string problem;
    memory_limit_ = platform::make_memory_limit(*launch_.memory_limit, problem);
    if (memory_limit_) {
      // The step that enters the cgroup is always there, so a missing kernel program is
      // found here, to fail the same way as without a limit.
      if (request.argv.empty() || !util::find_on_path(request.argv.front()))
        throw SpawnError("cannot start " + (request.argv.empty() ? "" : request.argv.front()) +
                             ": " + std::strerror(ENOENT),
                         ENOENT);
      request.argv = memory_limit_->wrap_argv(launch_.argv);
    } else {
      const std::string note =
          "--memory-limit " + util::format_bytes(static_cast<double>(*launch_.memory_limit)) +
          " not applied: " + problem + "; the kernel runs without a memory limit";
      spdlog::error("{}", note);
      notes_.push_back(note);
    }
  }
  if (launch_.faulthandler) {
    try {
      python_shim_ = faulthandler::PythonShim::create();
    } catch (const std::exception& e) {  // fail open: the kernel starts without it
      notes_.push_back(std::string("no Python traceback at a crash: ") + e.what());
      spdlog::warn("{}", notes_.back());
    }
  }
  // Taken now, for the shim's files; given back if this kernel never starts (the manager's
  // next try then shows it).
  std::optional<nlohmann::json> notice;
  if (python_shim_ && launch_.death_notices) notice = pass_on_death_notice();
  // Whatever stops the start before the kernel runs gives the notice back.
  struct GiveBackUnlessStarted {
    const std::optional<nlohmann::json>& notice;
    std::string kernel_id;
    bool started = false;
    ~GiveBackUnlessStarted() {
      if (notice && !started) leave_death_notice(kernel_id, *notice);
    }
  } keeper{notice, protocol::kernel_id_from_connection_file(launch_.connection_file)};
  util::UniqueFd fault_write;
  util::UniqueFd cell_write;
  if (python_shim_) {
    int cells[2];
    if (platform::cloexec_nonblocking_pipe(cells) == 0) {
      cell_read_.reset(cells[0]);
      cell_write.reset(cells[1]);
      cells_announced_ = true;
      request.inherited_fds.push_back(cells[1]);
    }
    int fds[2];
    if (platform::cloexec_nonblocking_pipe(fds) == 0) {
      fault_read_.reset(fds[0]);
      fault_write.reset(fds[1]);
      // A faulthandler that finds its pipe full would block in the signal handler: the
      // write end blocks (faulthandler retries), the read end is drained as it arrives.
      ::fcntl(fds[1], F_SETFL, ::fcntl(fds[1], F_GETFL) & ~O_NONBLOCK);
      request.inherited_fds.push_back(fds[1]);
    }
  }
  // The crash handler's socket pair: SEQPACKET, one message a crash, and the kernel's end
  // blocking (its handler waits on it, under its own time cap).
  util::UniqueFd crash_write;
  // Where the system keeps a crashed process's report (macOS), it is read after the death.
  if (python_shim_ && !stacks::system_writes_crash_reports()) {
    const auto library = stacks::crash_handler_library();
    int pair[2];
    if (library.empty()) {
      crash_handler_missing_ = std::string(stacks::kCrashHandlerLibraryName) +
                               " is not beside the program: no native frames at a crash";
    } else if (platform::cloexec_socket_pair(SOCK_SEQPACKET, pair) != 0) {
      crash_handler_missing_ =
          std::string("no socket pair for the crash handler: ") + std::strerror(errno);
    } else {
      crash_socket_.reset(pair[0]);
      crash_write.reset(pair[1]);
      ::fcntl(pair[0], F_SETFL, ::fcntl(pair[0], F_GETFL) | O_NONBLOCK);
      request.inherited_fds.push_back(pair[1]);
      launch_.extra_environment.push_back("KERNEL_WATCHDOG_CRASH_LIBRARY=" + library.string());
    }
  }
  request.environment = environment();
  if (crash_write)
    request.environment.push_back("KERNEL_WATCHDOG_CRASH_FD=" + std::to_string(crash_write.get()));
  if (fault_write)
    request.environment.push_back("KERNEL_WATCHDOG_FAULT_FD=" + std::to_string(fault_write.get()));
  if (cell_write)
    request.environment.push_back("KERNEL_WATCHDOG_CELL_FD=" + std::to_string(cell_write.get()));
  auto child_stderr = stderr_->take_child_end();
  request.stderr_fd = child_stderr.get();
  if (!launch_.passthrough) request.stdout_fd = child_stderr.get();
  request.own_process_group = launch_.own_process_group;
  sigemptyset(&request.reset_to_default);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD})
    sigaddset(&request.reset_to_default, s);
  child_.emplace(ChildProcess::spawn(request));
  keeper.started = true;  // the notice is in the shim the kernel now runs with
  spdlog::debug("kernel started: pid {}", child_->pid());

  watch::WatchOptions wo;
  wo.kernel_pid = child_->pid();
  wo.connection_file = launch_.connection_file;
  wo.mode = launch_.mode;
  wo.kernel_argv = launch_.argv;
  // The kernel's environment is the one built above: what jupyter_server put in ours.
  for (const auto& entry : request.environment)
    if (entry.starts_with("JPY_SESSION_NAME=") && entry.size() > 17)
      wo.notebook = {entry.substr(17), "environment"};
  wo.sample_interval = launch_.sample_interval;
  wo.full_rate_window = launch_.full_rate_window;
  wo.listener = launch_.listener;
  wo.probes.cgroup_path = memory_limit_ ? memory_limit_->cgroup_dir() : std::string();
  wo.probes.nvml_library = launch_.nvml_library;
  wo.probes.gpu_interval = launch_.gpu_interval;
  wo.probes.host = launch_.host_sources;
  watch_ = std::make_unique<watch::Watch>(
      loop_, std::move(wo), std::make_unique<watch::ChildDeathSource>(child_->pid()),
      [this](const watch::ProcessEnd& end, std::int64_t at) { handle_death(end, at); },
      std::move(on_hang));
  watch_->set_stderr_tail(&stderr_->tail());
  if (cell_read_) watch_->set_before_sample([this] { read_cell_announcements(); });
  if (memory_limit_ && launch_.thrash_timeout.count() > 0)
    thrash_guard_.emplace(launch_.thrash_timeout);
  if (thrash_guard_ || sample_observer_)
    watch_->set_after_sample([this](const timeline::MemorySample& sample) {
      if (thrash_guard_) guard_against_thrashing(sample);
      if (sample_observer_) sample_observer_();
    });

  // Parse the signature table and compile its patterns now, off the death path (the
  // report must be on disk within milliseconds of the kernel's death).
  diagnosis::SignatureTable::active();
  watch_->start();
  last_words_ = watch::make_last_words(child_->pid(), stderr_->fd());
  last_words_timer_ =
      loop_.every(kLastWordsLookInterval, [this] { look_for_kernel_stderr_pipe(); });
  loop_.watch_fd(stderr_->fd(), [this] { on_stderr(); });
  if (fault_read_) loop_.watch_fd(fault_read_.get(), [this] { on_fault_output(); });
  if (crash_socket_) loop_.watch_fd(crash_socket_.get(), [this] { on_crash_message(); });
}

void WatchedKernel::on_crash_message() {
  char message[256];
  for (;;) {
    const ssize_t n = ::recv(crash_socket_.get(), message, sizeof message, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // every kernel-side end closed: nothing more will come
      loop_.unwatch_fd(crash_socket_.get());
      crash_socket_.reset();
      return;
    }
    const auto fault =
        stacks::parse_fatal_signal(std::string_view(message, static_cast<std::size_t>(n)));
    // Only the kernel's own first fatal signal is read; a forked child of it does not report
    // (the handler checks), and anything else on the socket is not ours.
    if (fault && child_ && fault->pid == child_->pid() && !crash_stack_ && !dead_) {
      const auto reported_at_ms = util::wall_ms();
      if (watch_) watch_->kernel_dying();
      crash_stack_ = stacks::capture_crash_stack(*fault, kCrashCaptureBudget);
      crash_stack_->reported_at_ms = reported_at_ms;
      // Once more while the thread still waits: after this, only faulthandler's dump and the
      // exit stand between the timeline's last sample and the death.
      if (watch_) watch_->sample_now();
      spdlog::debug("the kernel's thread {} took signal {}: {} native frames read in {} ms",
                    fault->tid, fault->signal, crash_stack_->frames.size(),
                    crash_stack_->capture_ms);
    }
    // The thread goes on to die (after faulthandler's dump, if it has one) whatever came.
    const char go = 1;
    (void)::send(crash_socket_.get(), &go, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
}

bool WatchedKernel::read_into(int fd, FaultChannel& channel) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return false;
    if (n < 0) return true;
    channel.feed(
        std::string_view(buf, static_cast<std::size_t>(n)), [this](launch::CellAnnouncement cell) {
          if (watch_)
            watch_->cell_announced(cell.execution_count, cell.code, cell.truncated, cell.at_ms);
        });
  }
}

void WatchedKernel::on_fault_output() {
  const bool had_text = fault_channel_.has_text();
  if (!read_into(fault_read_.get(), fault_channel_)) {
    loop_.unwatch_fd(fault_read_.get());
    fault_read_.reset();
  }
  // Faulthandler has begun its dump: the kernel lives a moment more.
  if (!had_text && fault_channel_.has_text() && watch_) watch_->kernel_dying();
}

void WatchedKernel::guard_against_thrashing(const timeline::MemorySample& sample) {
  if (dead_ || thrashing_ || !thrash_guard_) return;
  const auto spell = thrash_guard_->observe(sample, util::steady_ms());
  if (!spell) return;
  // As the OOM killer would have, had reclaim ever come up empty. `run`: the kernel alone
  // (what it started is the cgroup's to clean up when it goes); smoke: its whole group, the
  // kernel leading one of its own there.
  const bool sent = send_signal(SIGKILL);
  thrashing_ = nlohmann::json{{"ended_by_watchdog", sent},
                              {"since_ms", spell->since_ms},
                              {"at_ms", spell->at_ms},
                              {"seconds", spell->seconds},
                              {"thrash_timeout_s", launch_.thrash_timeout.count()},
                              {"limit_bytes", spell->limit},
                              {"usage_bytes", spell->usage},
                              {"most_file_cache_bytes", spell->most_file_cache},
                              {"refaults", spell->refaults},
                              {"refaults_per_second", spell->refaults_per_second}};
  using util::format_bytes;
  spdlog::warn(
      "the kernel (pid {}) has thrashed at its memory limit ({}) for {:.0f} s: its page cache "
      "squeezed to {} and read back from disk {:.0f} pages a second, the OOM killer not firing; "
      "{} (--thrash-timeout {})",
      child_ ? child_->pid() : 0, format_bytes(static_cast<double>(spell->limit)), spell->seconds,
      format_bytes(static_cast<double>(spell->most_file_cache)), spell->refaults_per_second,
      sent ? "ended it with SIGKILL" : "could not end it", launch_.thrash_timeout.count());
}

void WatchedKernel::read_cell_announcements() {
  if (cell_read_ && !read_into(cell_read_.get(), cell_channel_)) cell_read_.reset();
}

void WatchedKernel::check_death() {
  if (watch_ && !dead_) watch_->check_death();
}

bool WatchedKernel::send_signal(int signal) const {
  return child_ && !dead_ && child_->send_signal(signal);
}

bool WatchedKernel::shutdown_requested() const {
  return watch_ && watch_->shutdown_requested();
}

void WatchedKernel::on_stderr() {
  if (!stderr_->pump()) {
    loop_.unwatch_fd(stderr_->fd());
    return;
  }
  // What a kernel writes on fd 2 last is often its crash (faulthandler's traceback comes
  // before the fatal signal is re-raised): a sample now is the closest one to its death.
  // A flood of native log lines is sampled at most every kMinStderrSampleGapNs.
  if (util::steady_ns() - watch_->last_sample_ns() >= kMinStderrSampleGapNs) watch_->sample_now();
}

void WatchedKernel::look_for_kernel_stderr_pipe() {
  // ipykernel makes its pipe while it starts (a second or so); a kernel that has not made
  // one by then keeps our pipe as its fd 2, and we read that ourselves.
  const bool done = last_words_->try_attach() || ++last_words_looks_ >= kLastWordsMaxLooks;
  if (done && last_words_timer_) {
    loop_.cancel(*last_words_timer_);
    last_words_timer_.reset();
  }
}

void WatchedKernel::handle_death(const watch::ProcessEnd& end, std::int64_t died_at_ms) {
  dead_ = true;
  if (last_words_timer_) {
    loop_.cancel(*last_words_timer_);
    last_words_timer_.reset();
  }
  try {
    stderr_->pump();  // whatever the kernel wrote last is already in the pipe
    if (last_words_) {
      const std::string words = last_words_->drain(kLastWordsLimit);
      if (!words.empty()) {
        stderr_->inject(words);
        notes_.push_back("the last " + std::to_string(words.size()) +
                         " bytes the kernel wrote to stderr were still unread in ipykernel's "
                         "stderr pipe at its death; recovered from it");
      }
    }
    read_cell_announcements();
    if (fault_read_) on_fault_output();
    if (std::string block = fault_channel_.take_text(); !block.empty()) {
      // After the library's last words, as it happened: the fatal signal came after them.
      // Into the report only: the kernel never asked for faulthandler's stack on its stderr
      // (the watchdog turned it on), and the terminal gets the watchdog's one line instead.
      if (stderr_->tail().size() > 0 && stderr_->tail().contents().back() != '\n')
        block.insert(0, "\n");
      stderr_->keep_for_report(block);
    }
  } catch (const std::exception& e) {
    spdlog::error("after the kernel's death: {}", e.what());
  }
  // Where the system writes a crashed process's report (macOS), the death is told once that
  // report is read, or given up on: the loop runs meanwhile (smoke's other kernels).
  if (wants_system_crash_report(end)) {
    wait_for_system_crash_report(end, died_at_ms);
    return;
  }
  on_death_(end, died_at_ms);
}

bool WatchedKernel::wants_system_crash_report(const watch::ProcessEnd& end) const {
  // Any kernel's, Python or not: the system writes a report for every process that crashes.
  return !crash_stack_ && child_ && stacks::system_writes_crash_reports() && end.status &&
         end.status->signaled && stacks::is_crash_signal(end.status->signal);
}

void WatchedKernel::wait_for_system_crash_report(const watch::ProcessEnd& end,
                                                 std::int64_t died_at_ms) {
  system_report_search_.emplace();
  system_report_search_->pid = child_->pid();
  system_report_search_->signal = end.status->signal;
  system_report_search_->died_at_ms = died_at_ms;
  const auto started = std::chrono::steady_clock::now();
  const auto look = [this, end, died_at_ms, started] {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
    auto found = stacks::look_for_system_crash_report(*system_report_search_);
    if (!found && waited < kSystemCrashReportBudget) return false;
    crash_stack_ = found ? std::move(*found)
                         : stacks::system_crash_report_not_found(*system_report_search_, waited);
    crash_stack_->capture_ms = waited.count();
    spdlog::debug("the system's crash report of the kernel: {} native frames, after {} ms",
                  crash_stack_->frames.size(), waited.count());
    if (system_report_timer_) loop_.cancel(*system_report_timer_);
    system_report_timer_.reset();
    on_death_(end, died_at_ms);
    return true;
  };
  if (!look())
    system_report_timer_ = loop_.every(kSystemCrashReportLookInterval, [look] { look(); });
}

void WatchedKernel::remove_shim() noexcept {
  if (python_shim_) python_shim_->remove();
}

void WatchedKernel::release_memory_limit() {
  if (!memory_limit_) return;
  if (const auto problem = memory_limit_->release(); !problem.empty())
    spdlog::warn("kernel's memory cgroup: {}", problem);
  memory_limit_.reset();
}

watch::WrittenReport WatchedKernel::write_report(const watch::ProcessEnd* end, std::int64_t at_ms,
                                                 const std::string& report_dir,
                                                 const std::vector<std::string>& watchdog_received,
                                                 nlohmann::json sections) {
  // A hang: which cell it is stuck in; any report: whether the shim ever started.
  read_cell_announcements();
  watch::ReportContext context;
  context.sections = std::move(sections);
  context.end = end;
  context.at_ms = at_ms;
  context.watchdog_received = watchdog_received;
  context.faulthandler = python_shim_.has_value();
  context.cell_announcements = cells_announced_;
  // The shim's first record says it runs; a kernel that never sent it (not Python, or an
  // interpreter that ignores PYTHONPATH) had neither faulthandler nor cell announcements.
  if (python_shim_ && cells_announced_) {
    const bool ran = cell_channel_.shim_started();
    context.python_shim_ran = ran;
    context.faulthandler = ran;
    context.cell_announcements = ran && cell_channel_.announces_cells();
    if (!ran) {
      context.python_shim_why_not = launch::shim_blocked_by(launch_.argv);
      if (context.python_shim_why_not.empty())
        context.python_shim_why_not =
            "the kernel never imported it: not a Python kernel, or its interpreter resets "
            "PYTHONPATH or does not run site.py";
    }
  }
  context.notes = notes_;
  if (thrashing_) context.sections["memory_thrash"] = *thrashing_;
  // The faulting thread's native frames, when the handler reported; why there are none, when
  // the kernel died of a signal that would have had them.
  if (end != nullptr && crash_stack_) {
    context.sections["crash_stack"] = stacks::to_json(*crash_stack_);
  } else if (end != nullptr && end->status && end->status->signaled &&
             stacks::is_crash_signal(end->status->signal) && !crash_handler_missing_.empty()) {
    stacks::CrashStack none;
    none.fault.signal = end->status->signal;
    none.missing = crash_handler_missing_;
    context.sections["crash_stack"] = stacks::to_json(none);
  }
  const std::string kernel_id = protocol::kernel_id_from_connection_file(launch_.connection_file);
  auto written = watch::write_report(*watch_, context, kernel_id, report_dir);
  // Only a shim shows a notice, and the restarted kernel runs with the same options as this.
  if (end != nullptr && launch_.death_notices && launch_.faulthandler && written.path)
    leave_death_notice(kernel_id, death_notice(written.document, *written.path));
  return written;
}

std::optional<nlohmann::json> WatchedKernel::pass_on_death_notice() {
  const std::string kernel_id = protocol::kernel_id_from_connection_file(launch_.connection_file);
  if (kernel_id.empty()) return std::nullopt;
  const auto text = claim_death_notice(kernel_id);
  if (!text) return std::nullopt;
  auto notice = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!notice.is_object()) return std::nullopt;  // not one we wrote: dropped
  try {
    python_shim_->add_notice(*text);
    spdlog::debug("the previous kernel's death notice goes to the first cell");
    return notice;
  } catch (const std::exception& e) {
    spdlog::debug("death notice not passed on, left for the next start: {}", e.what());
    leave_death_notice(kernel_id, notice);
    return std::nullopt;
  }
}

}  // namespace kwd::launch
