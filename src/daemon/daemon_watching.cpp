#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <zmq.hpp>

#include "kwd/daemon/daemon.hpp"
#include "kwd/daemon/kernel_name.hpp"
#include "kwd/daemon/off_loop_read.hpp"
#include "kwd/daemon/report_line.hpp"
#include "kwd/diagnosis/causes.hpp"
#include "kwd/diagnosis/report_view.hpp"
#include "kwd/logging/log_fields.hpp"
#include "kwd/platform/memory_reuse.hpp"
#include "kwd/platform/namespaces.hpp"
#include "kwd/platform/root_view.hpp"
#include "kwd/probes/process_identity.hpp"
#include "kwd/protocol/connection_file.hpp"
#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/report/fallback_reports.hpp"
#include "kwd/report/report_store.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/wipe.hpp"
#include "kwd/watch/death_policy.hpp"
#include "kwd/watch/report_writer.hpp"

// One kernel the daemon found: its Watch set up, and what its death or hang is told as.

namespace kwd::daemon {
namespace {

constexpr std::chrono::milliseconds kDaemonIdleSampleInterval{5000};
// A kernel at rest runs no cell: what a ping can find there (a stopped or thrashing process)
// waits for nobody, and a cell's busy brings the full pace back at once.
constexpr std::chrono::milliseconds kDaemonIdlePingInterval{10'000};
// A connection file is a few hundred bytes; what is longer is not read further.
constexpr std::size_t kMaxConnectionFileBytes = 1 << 20;
// How long a kernel's death by a signal waits for its manager to delete the connection file
// (jupyter_client polls the process every 100 ms, then cleans up at once), and how often it
// looks.
constexpr std::int64_t kManagerCleanupWindowNs = 1'500'000'000;
constexpr std::chrono::milliseconds kManagerCleanupPoll{50};

// How long the loop waits for a connection file's read before it leaves the read to its own
// thread and looks again at a later scan: a file that answers is read in microseconds.
constexpr std::chrono::milliseconds kConnectionFileWait{50};
// A read waiting this long is said in the log, once.
constexpr std::chrono::milliseconds kConnectionFileStallSaid{1000};

// A kernel's connection file as the kernel names it, read inside its own root (a container's
// file system, links resolved there).
platform::RootView::FileRead connection_file_in_root(const std::string& proc_root, pid_t pid,
                                                     const std::string& path) {
  if (const auto root = platform::RootView::of_process(proc_root, pid))
    return root->read_file(path, kMaxConnectionFileBytes);
  platform::RootView::FileRead none;
  none.problem = "cannot look into its root directory (" + proc_root + "/" + std::to_string(pid) +
                 "/root): it is gone, not ours to look into, or this system has no openat2 to "
                 "walk another root safely";
  return none;
}

// How a kernel's connection file is read: through its own root for every user's kernels, as
// a path of ours for our own.
OffLoopRead::Read connection_file_read(bool all_users, const std::string& proc_root, pid_t pid,
                                       const std::string& path) {
  if (all_users) return [=] { return connection_file_in_root(proc_root, pid, path); };
  return [=] { return platform::RootView::host().read_file(path, kMaxConnectionFileBytes); };
}

// The report's one line on stdout, for a node's log shipper (all_users).
void print_report_line(const nlohmann::json& report,
                       const std::optional<std::filesystem::path>& path) {
  const std::string line = report_line(report, path ? path->string() : std::string());
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

std::optional<platform::RootView::FileRead> Daemon::connection_file_of(
    const KernelProcess& process) {
  const std::pair key{process.pid, process.start_time};
  auto it = connection_reads_.find(key);
  bool waited = false, not_waited = false;
  if (it == connection_reads_.end()) {
    // For a second after a read ran out of its wait, new reads are not waited for: a stalled
    // home holding every kernel's file costs a scan one wait, not one for each kernel.
    not_waited = util::steady_ms() - connection_read_stalled_ms_ < 1000;
    waited = !not_waited;
    it = connection_reads_
             .emplace(key, PendingRead{OffLoopRead(
                               connection_file_read(options_.all_users, options_.node.proc_root,
                                                    process.pid, process.connection_file),
                               not_waited ? std::chrono::milliseconds(0) : kConnectionFileWait)})
             .first;
  }
  if (auto answer = it->second.read.take()) {
    connection_reads_.erase(it);
    return answer;
  }
  if (waited) connection_read_stalled_ms_ = util::steady_ms();
  if (not_waited) scan_soon();  // its answer, there in a moment if its mount answers
  if (!it->second.said)
    if (const auto blocked = it->second.read.blocked(kConnectionFileStallSaid)) {
      it->second.said = true;
      spdlog::warn(
          "pid {}: its connection file {} has not been read after {} ms: its file system does "
          "not answer ({} waits); it is watched once the read answers, and every other kernel "
          "meanwhile",
          process.pid, process.connection_file, util::steady_ms() - blocked->since_ms,
          blocked->path);
    }
  return std::nullopt;
}

void Daemon::start_watching(const KernelProcess& process) {
  const auto skip = [&](const std::string& why) {
    spdlog::warn("not watching pid {} ({}): {}", process.pid, process.connection_file, why);
    skipped_.insert({process.pid, process.start_time});
  };
  probes::KernelNotebook notebook;
  std::optional<ContainerIdentity> container;
  std::string named_kernel;  // the kernelspec, as the connection file names it
  // Every user's and container's kernel: its file is read as the kernel sees it, through its
  // own root, and must be its owner's. Off the loop: a file whose mount stopped answering
  // holds up this kernel only, looked at again by later scans.
  auto answered = connection_file_of(process);
  if (!answered) return;
  auto& file = *answered;
  // The key in it, or what a link made us read before the owner check refused it.
  struct WipedAtExit {
    std::optional<std::string>& text;
    ~WipedAtExit() {
      if (text) util::wipe(text->data(), text->size());
    }
  } wiped{file.text};
  if (file.missing) {
    if (!options_.all_users) return;  // not written yet, or removed: the next scan looks again
    // Not written yet (the kernel writes it once its ports are bound): looked for again by
    // quick scans while it is new, by the regular ones after.
    const auto at =
        waiting_for_file_.try_emplace({process.pid, process.start_time}, util::steady_ms()).first;
    if (util::steady_ms() - at->second < kFileWaitQuickMs) scan_soon();
    return;
  }
  waiting_for_file_.erase({process.pid, process.start_time});
  if (!file.text) return skip(file.problem);
  const uid_t expected_owner = options_.all_users ? process.uid : ::getuid();
  if (file.owner != expected_owner) return skip("its connection file belongs to another user");
  try {
    const auto info = protocol::parse_connection_info(*file.text);
    if (!info.jupyter_session.empty()) notebook = {info.jupyter_session, "connection_file"};
    named_kernel = info.kernel_name;
  } catch (const std::exception& e) {
    return skip(process.connection_file + ": " + e.what());
  }
  if (notebook.path.empty()) notebook = probes::notebook_of_kernel("", process.pid);
  if (options_.all_users) container = container_of_process(process.pid, options_.node);
  if (notebook.path.empty())
    if (auto path = sessions_->notebook_of(
            protocol::kernel_id_from_connection_file(process.connection_file));
        !path.empty())
      notebook = {std::move(path), "jupyter_server"};
  std::unique_ptr<watch::DeathSource> death;
  try {
    death = watch::make_process_death_source(process.pid);
  } catch (const std::exception& e) {
    return skip(std::string("cannot watch the process: ") + e.what());
  }
  Kernel kernel;
  kernel.process = process;
  kernel.kernel_id = protocol::kernel_id_from_connection_file(process.connection_file);
  kernel.notebook = notebook.path;
  // jupyter_client names the kernelspec in the file; the argv is matched for kernels whose
  // file does not say (older clients, kernels started by hand).
  kernel.kernel_name =
      named_kernel.empty() ? kernelspec_name_for(process.argv, kernelspecs()) : named_kernel;
  kernel.watched_since_ms = util::wall_ms();
  kernel.container = std::move(container);
  kernel.connection_file_look = std::make_shared<FileLook>(process.connection_file);
  if (kernel.container)
    kernel.container_oom_kills_at_start = container_memory(*kernel.container).oom_kills;
  if (auto previous = last_death_by_file_.find(file_key(kernel));
      previous != last_death_by_file_.end() &&
      util::steady_ms() - previous->second.at_ms <= kDeathRememberedMs)
    kernel.previous_death = previous->second.report_id;
  watch::WatchOptions wo;
  wo.kernel_pid = process.pid;
  wo.connection_file = process.connection_file;
  wo.mode = "daemon";
  wo.kernel_argv = process.argv;
  wo.notebook = notebook;
  wo.sample_interval = options_.sample_interval;
  // A background service: an idle kernel whose memory is flat is looked at every 5 s; a busy
  // or growing one at the full rate.
  wo.idle_sample_interval = std::max(options_.sample_interval, kDaemonIdleSampleInterval);
  // A kernel found alone is sampled at once. Kernels found in a burst (each within a sample
  // interval of the one before) take their first readings in sixteen steps over one
  // interval, not all in the same tick.
  const std::int64_t now_ms = util::steady_ms();
  first_sample_step_ = now_ms - last_watch_started_ms_ < options_.sample_interval.count()
                           ? (first_sample_step_ + 1) % 16
                           : 0;
  last_watch_started_ms_ = now_ms;
  wo.first_sample_after = options_.sample_interval * first_sample_step_ / 16;
  // A kernel found long after its start is past its start-up: its rates count at once.
  if (process.started_at_ms > 0) wo.kernel_started_at_ms = process.started_at_ms;
  wo.listener = options_.listener;
  // Every 10 s at rest, every second as soon as it is not: 200 idle kernels pinged every
  // second cost the daemon 2 % of a core in wake-ups, every 5 s still a tenth of its 1.1 %.
  wo.listener.heartbeat.idle_interval =
      std::max(wo.listener.heartbeat.interval, kDaemonIdlePingInterval);
  // The listener's reads of the file (its ports, again after a restart) go off the loop too.
  wo.listener.read_connection_file =
      [read = connection_file_read(options_.all_users, options_.node.proc_root, process.pid,
                                   process.connection_file),
       pending = std::make_shared<std::optional<OffLoopRead>>()](const std::string& path) {
        if (!*pending) pending->emplace(read, kConnectionFileWait);
        auto answer = (*pending)->take();
        if (!answer)
          throw protocol::ConnectionFileError(
              fmt::format("{}: its file system has not answered for {} ms (a stalled mount?)", path,
                          util::steady_ms() - (*pending)->started_ms()));
        pending->reset();
        if (answer->missing) return std::optional<std::string>();
        if (!answer->text) throw protocol::ConnectionFileError(answer->problem);
        return std::move(answer->text);
      };
  wo.connection_file_present = [look = kernel.connection_file_look] {
    return look->present(kConnectionFileWait);
  };
  wo.probes.nvml_library = options_.nvml_library;
  wo.probes.host = host_sources_;
  wo.zmq_context = options_.all_users ? context_for(process.pid) : zmq_context_;
  const pid_t pid = process.pid;
  kernel.watch = std::make_unique<watch::Watch>(
      loop_, std::move(wo), std::move(death),
      [this, pid](const watch::ProcessEnd& end, std::int64_t at) { on_death(pid, end, at); },
      [this, pid](const protocol::HangEvidence& hang) { on_hang(pid, hang); });
  auto& placed = kernels_[pid] = std::move(kernel);
  placed.watch->start();
  record_watched();
  const logging::LogFields fields({{"kernel_id", placed.kernel_id}});
  std::string found_at;
  if (const auto exec = exec_at_ns_.find(pid); exec != exec_at_ns_.end() && exec->second > 0)
    found_at = fmt::format(", {:.1f} ms after its exec",
                           static_cast<double>(util::steady_ns() - exec->second) / 1e6);
  std::string where;
  if (placed.container)
    where = fmt::format(", container {} of {}",
                        placed.container->container_name.empty()
                            ? placed.container->container_id.substr(0, 12)
                            : placed.container->container_name,
                        placed.container->pod_ref());
  spdlog::info("watching kernel {} (pid {}{}{}{}{})", placed.kernel_id, pid, found_at, where,
               notebook.path.empty() ? "" : ", ", notebook.path);
}

void Daemon::on_death(pid_t pid, const watch::ProcessEnd& end, std::int64_t at_ms) {
  auto it = kernels_.find(pid);
  if (it == kernels_.end()) return;
  Kernel& k = it->second;
  ended_.insert({pid, k.process.start_time});
  const logging::LogFields fields({{"kernel_id", k.kernel_id}});
  // jupyter_client interrupts (SIGINT) every kernel it shuts down, before the request; a
  // kernel still starting has no handler for it yet and dies of it. Once started, ipykernel
  // turns SIGINT into KeyboardInterrupt, so a death by SIGINT is a manager's shutdown.
  const bool interrupted_by_manager =
      end.status && end.status->signaled && end.status->signal == SIGINT;
  if (interrupted_by_manager ||
      watch::death_was_requested(end, k.watch->shutdown_requested(), {}, at_ms)) {
    spdlog::info("kernel {} (pid {}) {} (requested); no report", k.kernel_id, pid,
                 end.status ? end.status->describe() : end.how_known);
    let_go(pid);
    return;
  }
  if (k.notebook.empty()) name_notebook(k, true);
  // A kernel that publishes no shutdown_reply (IRkernel answers on its control channel only,
  // which the daemon cannot hear) and is slow to go gets jupyter_client's SIGTERM, then its
  // SIGKILL; the daemon, outside the kernel's process group, sees neither signal sent. What it
  // can see is the manager's clean-up: jupyter_client deletes the connection file as soon as the
  // process is gone. A kernel that crashed, or that another killed, keeps its file (a restart
  // reuses it). So the report of a death by such a signal, or of unknown cause, is built at
  // once and waits a moment for that. One that names the OOM killer is stored at once: nbclient
  // also cleans up at once, after an OOM kill it did not cause.
  const bool killed_by_signal =
      !end.status || (end.status->signaled && (watch::is_termination_signal(end.status->signal) ||
                                               end.status->signal == SIGKILL));
  // A file already gone when the death was first seen went before it (a launcher that deletes
  // it once the kernel has read it): no sign of a manager's clean-up. Unless a runtime
  // directory's watch saw it removed a moment ago: the manager was quicker than this loop (a
  // burst of deaths, each report built in turn).
  const bool file_at_death = k.watch->connection_file_at_death().value_or(false);
  const bool removed_as_it_ended = killed_by_signal && !k.container && !file_at_death &&
                                   removed_a_moment_ago(k.process.connection_file);
  if (!killed_by_signal || k.container || (!file_at_death && !removed_as_it_ended)) {
    store_death(pid, end, at_ms, std::nullopt);
    return;
  }
  auto report = watch::build_report(*k.watch, death_context(k, end, at_ms), k.kernel_id);
  if (!report) {  // logged; one more try, counted as a failure if it fails again
    store_death(pid, end, at_ms, std::nullopt);
    return;
  }
  // A death the report proves from what no manager's kill leaves (the OOM killer's own
  // lines and counters, a segfault the kernel log recorded) is stored at once.
  if (const auto cause = diagnosis::ReportView(*report).text("/diagnosis/cause").value_or("");
      diagnosis::is_oom_kill(cause) ||
      cause == diagnosis::cause(diagnosis::CauseId::native_crash).id) {
    store_death(pid, end, at_ms, std::move(report));
    return;
  }
  if (removed_as_it_ended) {
    spdlog::info(
        "kernel {} (pid {}) {} (stopped by its manager: its connection file was removed as it "
        "ended); no report",
        k.kernel_id, pid, end.status ? end.status->describe() : end.how_known);
    let_go(pid);
    return;
  }
  spdlog::info("kernel {} (pid {}) {}: its report waits up to {} ms for its manager's clean-up",
               k.kernel_id, pid, end.status ? end.status->describe() : end.how_known,
               kManagerCleanupWindowNs / 1'000'000);
  k.pending_death = Kernel::PendingDeath{end, at_ms, util::steady_ns() + kManagerCleanupWindowNs,
                                         std::move(*report)};
  // Not from inside the watch's own handler: the first look is on the loop's next pass.
  loop_.after(std::chrono::milliseconds(0), [this, pid] { wait_for_managers_cleanup(pid); });
}

bool Daemon::removed_a_moment_ago(const std::string& connection_file) {
  note_runtime_dir_changes();  // a removal announced, not read yet, counts
  const auto removed = removed_at_ns_.find(connection_file);
  return removed != removed_at_ns_.end() &&
         util::steady_ns() - removed->second <= kManagerCleanupWindowNs;
}

void Daemon::wait_for_managers_cleanup(pid_t pid) {
  const auto it = kernels_.find(pid);
  if (it == kernels_.end() || !it->second.pending_death) return;
  Kernel& k = it->second;
  auto& pending = *k.pending_death;
  // Off the loop: nullopt (no answer) counts as there, and the report waits out its time.
  if (k.connection_file_look &&
      k.connection_file_look->present(kManagerCleanupPoll / 5) == std::optional<bool>(false)) {
    const logging::LogFields fields({{"kernel_id", k.kernel_id}});
    spdlog::info(
        "kernel {} (pid {}) {} (stopped by its manager: its connection file went with it); no "
        "report",
        k.kernel_id, pid,
        pending.end.status ? pending.end.status->describe() : pending.end.how_known);
    let_go(pid);
    return;
  }
  if (util::steady_ns() >= pending.until_ns) {
    store_pending_death(pid);
    return;
  }
  loop_.after(kManagerCleanupPoll, [this, pid] { wait_for_managers_cleanup(pid); });
}

void Daemon::store_pending_death(pid_t pid) {
  const auto it = kernels_.find(pid);
  if (it == kernels_.end() || !it->second.pending_death) return;
  auto pending = std::move(*it->second.pending_death);
  it->second.pending_death.reset();
  store_death(pid, pending.end, pending.at_ms, std::move(pending.report));
}

watch::ReportContext Daemon::death_context(const Kernel& k, const watch::ProcessEnd& end,
                                           std::int64_t at_ms) const {
  watch::ReportContext context;
  context.end = &end;
  context.at_ms = at_ms;
  if (!end.status)
    context.notes.push_back(
        "the exit status of a kernel that is not the watchdog's child could not be known "
        "here (" +
        end.how_known +
        "); under `kernel-watchdog run` (kernelspec wrap) it "
        "always is");
  if (!k.previous_death.empty())
    context.notes.push_back(
        "this kernel's previous process (same connection file) died "
        "too: report " +
        k.previous_death);
  if (k.container) context.sections["kubernetes"] = kubernetes_section(k);
  return context;
}

void Daemon::store_death(pid_t pid, const watch::ProcessEnd& end, std::int64_t at_ms,
                         std::optional<nlohmann::json> report) {
  auto it = kernels_.find(pid);
  if (it == kernels_.end()) return;
  Kernel& k = it->second;
  const logging::LogFields fields({{"kernel_id", k.kernel_id}});
  const auto context = death_context(k, end, at_ms);
  const auto written = report
                           ? watch::store_report(*k.watch, std::move(*report), context, k.kernel_id,
                                                 report_dir_for(k))
                           : watch::write_report(*k.watch, context, k.kernel_id, report_dir_for(k));
  if (written.path) remember_death(file_key(k), written.path->stem().string());
  count_written(report_dir_for(k), written.path.has_value(), written.in_fallback);
  if (options_.all_users) print_report_line(written.document, written.path);
  const std::pair<std::string, std::string> key{
      diagnosis::ReportView(written.document).text("/diagnosis/cause").value_or("unknown"),
      k.container ? k.container->namespace_name : std::string()};
  ++deaths_by_cause_[key];
  last_death_by_cause_[key] = {written.path ? written.path->stem().string() : std::string(),
                               k.notebook, k.container ? k.container->pod_name : std::string(),
                               static_cast<double>(at_ms) / 1000.0};
  let_go(pid);
}

void Daemon::let_go(pid_t pid) {
  // Not from inside the watch's own handler: it is destroyed on the loop's next pass. The
  // metrics are published then, at once: the dead kernel's gauges (an RSS of 0, its last time
  // to a limit) would otherwise stand until the next publication.
  const bool publish = metrics_server_ || !options_.metrics_textfile.empty();
  loop_.after(std::chrono::milliseconds(0), [this, pid, publish] {
    kernels_.erase(pid);
    record_watched();
    if (publish) publish_metrics();
    give_freed_memory_back_soon();
  });
}

void Daemon::give_freed_memory_back_soon() {
  // Once for the kernels of a burst that end together.
  if (memory_give_back_) return;
  memory_give_back_ = loop_.after(std::chrono::seconds(1), [this] {
    memory_give_back_.reset();
    platform::give_freed_memory_back();
  });
}

nlohmann::json Daemon::kubernetes_section(const Kernel& k) {
  nlohmann::json section = k.container->to_json();
  const ContainerMemory now = container_memory(*k.container);
  const auto bytes = [](const std::optional<std::int64_t>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  nlohmann::json memory = {
      {"container_limit", bytes(now.container_limit)},
      {"pod_limit", bytes(now.pod_limit)},
      {"oom_kills_before", bytes(k.container_oom_kills_at_start)},
      {"oom_kills_after", bytes(now.oom_kills)},
      {"oom_group", now.oom_group ? nlohmann::json(*now.oom_group) : nlohmann::json(nullptr)},
      {"processes_left", bytes(now.processes_left)}};
  const bool oom_here = now.oom_kills && k.container_oom_kills_at_start &&
                        *now.oom_kills > *k.container_oom_kills_at_start;
  // The whole container went: the kernel's group kill (memory.oom.group, what kubelet sets on
  // cgroup v2 from Kubernetes 1.28), or nothing of it left once the kernel died.
  memory["group_killed"] = oom_here && now.oom_group.value_or(false);
  memory["container_emptied"] = now.processes_left && *now.processes_left == 0;
  section["memory"] = std::move(memory);
  return section;
}

void Daemon::on_hang(pid_t pid, const protocol::HangEvidence& hang) {
  auto it = kernels_.find(pid);
  if (it == kernels_.end()) return;
  watch::ReportContext context;
  context.at_ms = hang.detected_at_ms;
  if (it->second.container) context.sections["kubernetes"] = kubernetes_section(it->second);
  const auto written = watch::write_report(*it->second.watch, context, it->second.kernel_id,
                                           report_dir_for(it->second));
  count_written(report_dir_for(it->second), written.path.has_value(), written.in_fallback);
  if (options_.all_users) print_report_line(written.document, written.path);
}

void Daemon::count_written(const std::string& report_dir, bool written, bool in_fallback) {
  if (written) ++reports_written_;
  if (!written || in_fallback) ++report_write_failures_;
  if (in_fallback) stores_refusing_.insert(report_dir);
}

void Daemon::adopt_waiting_reports() {
  // A store that took the waiting reports back, or has none waiting any more, is let go.
  std::erase_if(stores_refusing_, [](const std::string& dir) {
    const report::ReportStore store(report::ReportStore::resolve_dir(dir),
                                    report::StoreLimits::from_environment());
    return watch::adopt_waiting_reports(store) == 0;
  });
}

std::shared_ptr<zmq::context_t> Daemon::context_for(pid_t pid) {
  const auto theirs = platform::net_namespace_of(pid);
  if (!theirs || theirs == platform::own_net_namespace()) return zmq_context_;
  std::erase_if(namespace_contexts_, [](const auto& entry) { return entry.second.expired(); });
  if (auto known = namespace_contexts_[*theirs].lock()) return known;
  try {
    // ZeroMQ opens a context's TCP connections in its I/O thread, which it starts with the
    // context's first socket: started from inside the pod's network namespace, it connects to
    // the pod's loopback, where the kernel listens.
    const platform::NetNamespaceEntered inside(pid);
    auto context = std::make_shared<zmq::context_t>(1);
    context->set(zmq::ctxopt::max_sockets, 4096);
    zmq::socket_t starter(*context, zmq::socket_type::sub);
    starter.close();
    namespace_contexts_[*theirs] = context;
    return context;
  } catch (const std::exception& e) {
    spdlog::warn(
        "kernel pid {} is in another network namespace that cannot be entered ({}); "
        "its IOPub and heartbeat are tried from the node's",
        pid, e.what());
    return zmq_context_;
  }
}

void Daemon::remember_death(const std::string& file_key, std::string report_id) {
  const std::int64_t now = util::steady_ms();
  std::erase_if(last_death_by_file_,
                [&](const auto& entry) { return now - entry.second.at_ms > kDeathRememberedMs; });
  while (last_death_by_file_.size() >= kDeathsRemembered && !last_death_by_file_.contains(file_key))
    last_death_by_file_.erase(std::ranges::min_element(
        last_death_by_file_, {}, [](const auto& entry) { return entry.second.at_ms; }));
  last_death_by_file_[file_key] = {std::move(report_id), now};
}

std::string Daemon::file_key(const Kernel& k) {
  return (k.container ? k.container->container_id + ":" : std::string()) +
         k.process.connection_file;
}

std::string Daemon::report_dir_for(const Kernel& k) const {
  if (!k.container) return options_.report_dir;
  // The node's store, one private directory per pod: NAMESPACE/POD, or the pod's UID where
  // the kubelet's records do not name it.
  const auto base = report::ReportStore::resolve_dir(options_.report_dir);
  const auto& c = *k.container;
  const std::string ns = c.namespace_name.empty() ? "_unknown-namespace" : c.namespace_name;
  const std::string pod = c.pod_name.empty() ? "pod-" + c.pod_uid : c.pod_name;
  return (base / ns / pod).string();
}

}  // namespace kwd::daemon
