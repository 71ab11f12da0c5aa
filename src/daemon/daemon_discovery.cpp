#include <algorithm>
#include <chrono>

#include "kwd/daemon/daemon.hpp"
#include "kwd/util/clock.hpp"

// How the daemon finds kernels: the process table scanned (regularly, and quickly for a
// while after a connection file appears), the execs the process events announce, and which
// of those found are for it to watch.

namespace kwd::daemon {
namespace {

// After a connection file appears its kernel is looked for this often, this many times: the
// manager writes the file first and starts the process after.
constexpr std::chrono::milliseconds kQuickScanInterval{25};
constexpr int kQuickScans = 80;  // 2 s

}  // namespace

void Daemon::scan_soon() {
  quick_scans_left_ = kQuickScans;
  if (quick_scan_) return;
  // Not ended by the first kernel found: a burst of files (a server restoring fifty sessions)
  // waits for fifty processes. A quick scan examines only processes new in the table.
  quick_scan_ = loop_.every(kQuickScanInterval, [this] {
    // With process events, every exec was examined as it happened: what is left to do is to
    // watch the kernels whose connection file was not there yet, without listing the table
    // forty times a second while a server restores its sessions.
    if (process_events_ && process_events_->fd() >= 0)
      consider(scanner_.known());
    else
      scan(KernelProcessScanner::ScanKind::quick);
    if (--quick_scans_left_ <= 0) {
      loop_.cancel(*quick_scan_);
      quick_scan_.reset();
    }
  });
}

void Daemon::note_runtime_dir_changes() {
  if (!dirs_ || dirs_->fd() < 0) return;
  auto changes = dirs_->drain();
  if (changes.written) scan_soon();
  const std::int64_t now = util::steady_ns();
  std::erase_if(removed_at_ns_,
                [&](const auto& entry) { return now - entry.second > kRemovalsKeptNs; });
  for (auto& path : changes.removed)
    removed_at_ns_[std::move(path)] = now;
}

void Daemon::scan(KernelProcessScanner::ScanKind kind) {
  under_launcher_.clear();
  const auto found = scanner_.scan(kind);
  // Who is no longer in the table is forgotten: the same pid later is another process.
  if (!ended_.empty() || !skipped_.empty() || !waiting_for_file_.empty() ||
      !connection_reads_.empty()) {
    std::set<std::pair<pid_t, std::uint64_t>> present;
    for (const KernelProcess* process : found)
      present.insert({process->pid, process->start_time});
    std::erase_if(ended_, [&](const auto& key) { return !present.contains(key); });
    std::erase_if(waiting_for_file_,
                  [&](const auto& entry) { return !present.contains(entry.first); });
    std::erase_if(skipped_, [&](const auto& key) { return !present.contains(key); });
    std::erase_if(connection_reads_,
                  [&](const auto& entry) { return !present.contains(entry.first); });
  }
  consider(found);
  // A server records its session a moment after it starts the kernel; a kernel no server
  // has named within 30 s (VS Code's, papermill's, a console's) is not asked about again
  // until its death.
  if (kind == KernelProcessScanner::ScanKind::quick) return;
  name_unnamed_kernels();
}

void Daemon::name_unnamed_kernels() {
  const std::int64_t now = util::wall_ms();
  for (auto& [pid, k] : kernels_)
    if (k.notebook.empty() && now - k.watched_since_ms < 30'000) name_notebook(k, false);
}

void Daemon::on_process_events() {
  auto batch = process_events_->drain();
  if (batch.refused) {                        // scans only, from now on
    loop_.unwatch_fd(process_events_->fd());  // before the source closes it
    process_events_.reset();
    scanner_.set_execs_announced(false);
    scan();  // what exec'd before the refusal came was not examined at its exec
    return;
  }
  if (batch.lost) {
    // Which execs were missed is not known: the whole table, new processes looked at as if
    // no exec had been announced.
    scanner_.set_execs_announced(false);
    scan();
    scanner_.set_execs_announced(true);
  }
  if (batch.exec.empty()) return;
  const auto found = scanner_.examine_now(batch.exec);
  for (std::size_t i = 0; i < batch.exec.size() && i < batch.exec_at_ns.size(); ++i)
    exec_at_ns_[batch.exec[i]] = batch.exec_at_ns[i];
  consider(found);
  exec_at_ns_.clear();
  // A kernel started without a connection file writes its own once its ports are bound:
  // looked for by the quick scans, not left to the next full one.
  for (const KernelProcess* process : found) {
    if (!process->under_launcher && !kernels_.contains(process->pid)) {
      scan_soon();
      break;
    }
  }
}

void Daemon::consider(const KernelProcessScanner::Found& found) {
  for (const KernelProcess* found_process : found) {
    const KernelProcess& process = *found_process;
    if (process.under_launcher) {
      if (std::none_of(under_launcher_.begin(), under_launcher_.end(),
                       [&](const auto& known) { return known.pid == process.pid; }))
        under_launcher_.push_back(process);
      continue;
    }
    if (auto it = kernels_.find(process.pid); it != kernels_.end()) {
      // The same process with another argv has exec'd since: what was watched was a wrapper
      // on its way to the kernel (`env -u VAR python -m ipykernel_launcher -f FILE`, `nice`,
      // `numactl`), whose argv, kernel name and environment (the notebook) are not the
      // kernel's. Watched afresh.
      if (it->second.process.start_time == process.start_time &&
          it->second.process.argv == process.argv)
        continue;
      // One that died and whose report waits (for its manager's clean-up) is let finish; the
      // new holder of its pid is found by a later scan.
      if (ended_.contains({process.pid, it->second.process.start_time})) continue;
      kernels_.erase(it);  // a reused pid, or an exec: the one we watched is gone
      record_watched();
    }
    if (skipped_.contains({process.pid, process.start_time}) ||
        ended_.contains({process.pid, process.start_time}))
      continue;
    start_watching(process);
  }
}

void Daemon::name_notebook(Kernel& k, bool now) {
  auto path = sessions_->notebook_of(k.kernel_id, now);
  if (path.empty()) return;
  k.notebook = path;
  k.watch->set_notebook({std::move(path), "jupyter_server"});
  record_watched();
}

const std::vector<kernelspec::Kernelspec>& Daemon::kernelspecs() {
  const std::int64_t now = util::steady_ms();
  if (kernelspecs_read_ms_ < 0 || now - kernelspecs_read_ms_ > kKernelspecsFreshMs) {
    kernelspecs_ = kernelspec::find_all();
    kernelspecs_read_ms_ = now;
  }
  return kernelspecs_;
}

}  // namespace kwd::daemon
