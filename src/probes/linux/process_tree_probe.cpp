#include "kwd/probes/linux/process_tree_probe.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "kwd/platform/linux/procfs.hpp"
#include "kwd/probes/host_sources.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/errno_text.hpp"

namespace kwd::probes::linux_proc {

using platform::linux_proc::find_kb_field;
using platform::linux_proc::parse_proc_stat;
using platform::linux_proc::parse_statm_resident;
using platform::linux_proc::pread_all;
using platform::linux_proc::read_small_file;

namespace {

// Kernels whose probes look for new processes within this of each other share one
// reading of /proc/loadavg (never more than a probe's own rescan interval).
constexpr std::int64_t kNewestPidShareMs = 50;

// A kernel started this recently, with no pid below its own handed out since (which
// rescan_if_needed checks), has no descendant with a lower pid: that would take the pid
// numbers going all the way round (pid_max process creations) within these seconds.
constexpr std::int64_t kYoungMs = 10'000;

// Whether the machine has any swap (/proc/swaps lists a device or a file beneath its header):
// without it no page is swapped out and VmSwap, a read of /proc/PID/status per process, is 0
// for certain. Asked again every 30 s (swapon may come later), once for all the kernels this
// process watches; unreadable counts as swap.
bool swap_configured(std::int64_t now_ms) {
  static std::atomic<std::int64_t> checked_ms{-1};
  static std::atomic<bool> configured{true};
  constexpr std::int64_t kRecheckMs = 30'000;
  const std::int64_t last = checked_ms.load(std::memory_order_relaxed);
  if (last < 0 || now_ms - last >= kRecheckMs) {
    checked_ms.store(now_ms, std::memory_order_relaxed);
    const auto text = read_small_file("/proc/swaps");
    const auto header_end = text ? text->find('\n') : std::string::npos;
    configured.store(header_end == std::string::npos || header_end + 1 < text->size(),
                     std::memory_order_relaxed);
  }
  return configured.load(std::memory_order_relaxed);
}

std::string pid_path(const std::string& proc, pid_t pid, const char* leaf) {
  return proc + "/" + std::to_string(pid) + "/" + leaf;
}

// Whether a process that started `start_ticks` after boot (its stat's starttime) did so within
// kYoungMs. False when unsure.
bool started_lately(std::uint64_t start_ticks) {
  timespec now{};
  const std::int64_t start_ms = platform::linux_proc::start_ticks_to_ms(start_ticks);
  if (start_ticks == 0 || start_ms < 0 || ::clock_gettime(CLOCK_BOOTTIME, &now) != 0) return false;
  const std::int64_t now_ms =
      static_cast<std::int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1'000'000;
  return now_ms - start_ms < kYoungMs;
}

}  // namespace

ProcessTreeProbe::ProcessTreeProbe(const ProbeOptions& options)
    : root_(options.kernel_pid),
      proc_(options.proc_root),
      processes_(options.processes ? options.processes
                                   : std::make_shared<KernelProcesses>(options.kernel_pid)),
      page_size_(::sysconf(_SC_PAGESIZE)),
      rescan_interval_ms_(options.tree_rescan_interval.count()),
      slow_interval_ms_(options.slow_interval.count()),
      pss_interval_ms_(options.pss_interval.count()),
      recent_(host_source<RecentProcesses>(
          options.host, options.proc_root,
          [&] { return std::make_shared<RecentProcesses>(options.proc_root); },
          [](const RecentProcesses& recent) { return !recent.readable(); })) {
  Member root;
  errno = 0;  // a read that worked but found the process gone leaves no reason of the system's
  if (!read_stat(root_, root)) {
    available_ = false;
    reason_ = util::cannot("read", pid_path(proc_, root_, "stat"), errno) +
              (errno == 0 ? " (the process has exited)" : "");
    return;
  }
  members_.emplace(root_, std::move(root));
  publish_members();
  reason_ = "procfs: RSS every sample, threads/swap every " + std::to_string(slow_interval_ms_) +
            " ms, PSS every " + std::to_string(pss_interval_ms_) +
            " ms or less often if it costs over 0.02% of a core, descendants rescanned when "
            "a process was created (at most every " +
            std::to_string(rescan_interval_ms_) + " ms)";
}

ProbeStatus ProcessTreeProbe::status() const {
  return {"linux.process_tree", available_, reason_};
}

bool ProcessTreeProbe::read_stat(pid_t pid, Member& m) {
  if (!m.stat_fd) {
    m.stat_fd.reset(::open(pid_path(proc_, pid, "stat").c_str(), O_RDONLY | O_CLOEXEC));
    if (!m.stat_fd) return false;
  }
  static thread_local std::string buf;
  const auto text = pread_all(m.stat_fd.get(), buf);
  if (!text) return false;
  const auto st = parse_proc_stat(*text);
  if (!st || st->state == 'Z' || st->state == 'X') return false;
  if (m.start_time == 0) {
    m.start_time = st->start_time;
  } else if (m.start_time != st->start_time) {
    return false;  // the pid was reused by an unrelated process
  }
  // comm changes on exec (the kernel starts as our cgroup-entering step), so it is re-read.
  if (m.readings.comm != st->comm) m.readings.comm = st->comm;
  m.readings.rss = st->rss_pages * page_size_;
  m.readings.peak_rss = std::max(m.readings.peak_rss, m.readings.rss);
  m.readings.threads = st->threads;
  return true;
}

bool ProcessTreeProbe::read_statm(pid_t pid, Member& m) {
  if (!m.statm_fd) {
    m.statm_fd.reset(::open(pid_path(proc_, pid, "statm").c_str(), O_RDONLY | O_CLOEXEC));
    if (!m.statm_fd) return false;
  }
  // The fd stays bound to the process it was opened for: once that is gone it fails with
  // ESRCH, even if the pid number is reused.
  static thread_local std::string buf;
  const auto text = pread_all(m.statm_fd.get(), buf);
  if (!text) return false;
  const auto pages = parse_statm_resident(*text);
  if (!pages) return false;
  // An exiting process has released its memory: all zeros. stat says whether it is a zombie.
  if (*pages == 0) return read_stat(pid, m);
  m.readings.rss = *pages * page_size_;
  m.readings.peak_rss = std::max(m.readings.peak_rss, m.readings.rss);
  return true;
}

void ProcessTreeProbe::read_swap(pid_t pid, Member& m) {
  if (!m.status_fd) {
    m.status_fd.reset(::open(pid_path(proc_, pid, "status").c_str(), O_RDONLY | O_CLOEXEC));
    if (!m.status_fd) return;
  }
  static thread_local std::string buf;
  if (const auto status = pread_all(m.status_fd.get(), buf))
    m.readings.swap = find_kb_field(*status, "VmSwap").value_or(0);
}

void ProcessTreeProbe::read_pss(pid_t pid, Member& m, std::int64_t now_ms) {
  if (const auto rollup = read_small_file(pid_path(proc_, pid, "smaps_rollup")))
    m.readings.pss = find_kb_field(*rollup, "Pss").value_or(-1);
  ++m.pss_reads;
  m.rss_at_pss = m.readings.rss;
  m.tree_at_pss = tree_changes_;
  m.pss_read_ms = now_ms;
}

bool ProcessTreeProbe::pss_settled(const Member& m, std::int64_t now_ms) const {
  // PSS moves with the process's own memory and with who else maps its pages. Within the
  // tree that is a member forking or leaving, and then, with RSS unchanged, the pages a fork
  // shares being written and copied; a process outside it sharing a file's pages is the rest,
  // and rarely matters. So a lone process whose RSS has stayed put keeps its last PSS for
  // minutes: the walk of its page tables costs about a millisecond for a bare Python (half of
  // a node daemon's idle CPU with 200 kernels read every minute). A tree of several keeps it a
  // minute.
  constexpr std::int64_t kRssSlack = 256 * 1024;
  const std::int64_t max_age_ms = members_.size() > 1 ? 60'000 : 300'000;
  return m.pss_reads > 0 && m.readings.pss >= 0 && now_ms - m.pss_read_ms < max_age_ms &&
         m.tree_at_pss == tree_changes_ && std::abs(m.readings.rss - m.rss_at_pss) < kRssSlack;
}

void ProcessTreeProbe::rescan_if_needed(std::int64_t now_ms) {
  if (last_rescan_ms_ >= 0 && now_ms - last_rescan_ms_ < rescan_interval_ms_) return;
  last_rescan_ms_ = now_ms;
  // Unchanged newest pid: no process was created anywhere since the last scan, so the tree
  // cannot have gained a member. Otherwise only pids above the previous newest are new,
  // unless pid numbers wrapped around.
  const pid_t newest = recent_->newest(std::min(kNewestPidShareMs, rescan_interval_ms_));
  if (newest >= 0 && newest == last_created_pid_) return;
  if (newest >= 0 && last_created_pid_ < 0)
    if (const auto root = members_.find(root_);
        root != members_.end() && started_lately(root->second.start_time)) {
      // The first look at a young kernel: its descendants are among the pids handed out after
      // its own, each looked up once for every kernel's probe, where hundreds of kernels
      // found together (a server restoring its sessions) would otherwise list /proc once
      // each while processes keep being created among them. A newest pid below the kernel's
      // is a reading shared from before it started, or the pid numbers wrapped around since
      // (then a child may have a lower pid than its parent): read afresh, and if it is still
      // below, the whole table is listed as for any other first look.
      const pid_t fresh = newest < root_ ? recent_->newest(0) : newest;
      if (fresh >= root_) {
        last_created_pid_ = fresh;
        if (fresh > root_) rescan(root_, fresh);
        return;
      }
    }
  const bool wrapped = newest < last_created_pid_;
  const pid_t created_after =
      (newest < 0 || last_created_pid_ < 0 || wrapped) ? 0 : last_created_pid_;
  last_created_pid_ = newest;
  rescan(created_after, newest);
}

void ProcessTreeProbe::rescan(pid_t created_after, pid_t newest) {
  // ppid of every process created since the last scan.
  std::unordered_map<pid_t, std::vector<pid_t>> children;
  if (created_after > 0 && newest > created_after && newest - created_after <= kRangeWalkMax) {
    // A few pids were handed out: look at those alone rather than list /proc. Pids grow
    // with creation, so a new parent comes before its new children. A thread's tid is a
    // pid too, and its stat names its process's parent: a candidate must lead its group.
    std::unordered_set<pid_t> fresh;
    for (pid_t pid = created_after + 1; pid <= newest; ++pid) {
      if (members_.contains(pid)) continue;
      const auto ppid = recent_->parent_of(pid);
      if (!ppid && !recent_->settled(pid) && last_created_pid_ >= pid) {
        // Not in /proc yet, perhaps still being forked: looked at again by the next scan.
        last_created_pid_ = pid - 1;
      }
      if (!ppid || (!members_.contains(*ppid) && !fresh.contains(*ppid))) continue;
      if (!recent_->is_process(pid)) continue;
      children[*ppid].push_back(pid);
      fresh.insert(pid);
    }
  } else {
    const auto* listed = recent_->processes();
    if (!listed) return;
    for (const auto& [pid, ppid] : *listed)
      if (pid > created_after && !members_.contains(pid)) children[ppid].push_back(pid);
  }
  // New members hang below current members, possibly several generations deep.
  std::vector<pid_t> frontier;
  for (const auto& [pid, m] : members_)
    frontier.push_back(pid);
  std::unordered_set<pid_t> seen(frontier.begin(), frontier.end());
  bool changed = false;
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    const auto it = children.find(parent);
    if (it == children.end()) continue;
    for (pid_t child : it->second) {
      if (!seen.insert(child).second) continue;
      frontier.push_back(child);
      Member m;
      if (read_stat(child, m)) {
        // A newcomer gets its PSS now rather than at the next (possibly distant) round.
        read_pss(child, m, util::steady_ms());
        members_.emplace(child, std::move(m));
        changed = true;
      }
    }
  }
  if (changed) publish_members();
}

void ProcessTreeProbe::remember_departed(pid_t pid, const Member& m) {
  Departed& d = departed_[departed_next_];
  d.pid = pid;
  d.last = m.readings;
  d.seen_last_ms = m.seen_last_ms;
  departed_next_ = (departed_next_ + 1) % departed_.size();
  departed_count_ = std::min(departed_count_ + 1, departed_.size());
  processes_->departed(pid);
}

void ProcessTreeProbe::publish_members() {
  ++tree_changes_;
  std::vector<pid_t> pids;
  pids.reserve(members_.size());
  for (const auto& [pid, m] : members_)
    pids.push_back(pid);
  processes_->set_members(std::move(pids));
}

void ProcessTreeProbe::sample(timeline::MemorySample& into) {
  if (!available_) return;
  const std::int64_t now = util::steady_ms();
  rescan_if_needed(now);
  const bool slow_due = last_slow_ms_ < 0 || now - last_slow_ms_ >= slow_interval_ms_;
  if (slow_due) last_slow_ms_ = now;
  const bool pss_due = last_pss_ms_ < 0 || now - last_pss_ms_ >= next_pss_after_ms_;
  if (pss_due) last_pss_ms_ = now;
  std::int64_t pss_cost_ns = 0;

  std::int64_t rss = 0, swap = 0, pss = 0, threads = 0;
  bool pss_known = true;
  bool left = false;
  for (auto it = members_.begin(); it != members_.end();) {
    Member& m = it->second;
    if (!(slow_due ? read_stat(it->first, m) : read_statm(it->first, m))) {
      remember_departed(it->first, m);
      it = members_.erase(it);
      left = true;
      continue;
    }
    m.seen_last_ms = into.t_ms;
    if (slow_due) {
      if (swap_configured(now))
        read_swap(it->first, m);
      else
        m.readings.swap = 0;
    }
    if (pss_due && !pss_settled(m, now)) {
      const std::int64_t started = util::steady_ns();
      read_pss(it->first, m, now);
      pss_cost_ns += util::steady_ns() - started;
    } else if (slow_due && m.pss_reads < kNewcomerPssReads) {
      read_pss(it->first, m, now);  // a newcomer's memory is still settling: follow it closely
    }
    rss += m.readings.rss;
    swap += m.readings.swap;
    threads += m.readings.threads;
    if (m.readings.pss < 0)
      pss_known = false;
    else
      pss += m.readings.pss;
    ++it;
  }
  if (left) publish_members();
  if (pss_due) {
    // smaps_rollup walks the page tables: for a kernel holding tens of GiB one reading costs
    // milliseconds. PSS readings are spaced to cost at most 1/kSlowBudgetInverse of a core.
    next_pss_after_ms_ =
        std::max<std::int64_t>(pss_interval_ms_, pss_cost_ns * kSlowBudgetInverse / 1'000'000);
  }
  if (members_.empty()) return;  // the kernel and all its own are gone: fields stay unknown
  into.rss = rss;
  into.swap = swap;
  into.pss = pss_known ? pss : timeline::kUnknown;
  into.processes = static_cast<std::int64_t>(members_.size());
  into.threads = threads;
}

void ProcessTreeProbe::on_kernel_exit(const KernelExit& /*how*/) {
  // read_stat() leaves the readings alone when the process is gone, so they are its last.
  bool left = false;
  for (auto it = members_.begin(); it != members_.end();) {
    if (read_stat(it->first, it->second)) {
      ++it;
      continue;
    }
    remember_departed(it->first, it->second);
    it = members_.erase(it);
    left = true;
  }
  if (left) publish_members();
}

std::vector<pid_t> ProcessTreeProbe::members() const {
  std::vector<pid_t> out;
  for (const auto& [pid, m] : members_)
    out.push_back(pid);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<ProcessTreeProbe::Departed> ProcessTreeProbe::departed() const {
  std::vector<Departed> out;
  const std::size_t cap = departed_.size();
  const std::size_t start = (departed_next_ + cap - departed_count_) % cap;
  for (std::size_t i = 0; i < departed_count_; ++i)
    out.push_back(departed_[(start + i) % cap]);
  return out;
}

void ProcessTreeProbe::contribute(nlohmann::json& report) const {
  using nlohmann::json;
  const auto entry = [](pid_t pid, const Readings& r) {
    json e = {{"pid", pid},     {"comm", r.comm},      {"rss", r.rss}, {"peak_rss", r.peak_rss},
              {"swap", r.swap}, {"threads", r.threads}};
    e["pss"] = r.pss >= 0 ? json(r.pss) : json(nullptr);
    return e;
  };
  auto& tree = report["process_tree"];
  tree["root_pid"] = root_;
  auto& list = tree["members"] = json::array();
  for (pid_t pid : members())
    list.push_back(entry(pid, members_.at(pid).readings));
  auto& gone = tree["departed"] = json::array();
  for (const auto& d : departed()) {
    json e = entry(d.pid, d.last);
    e["is_kernel"] = d.pid == root_;
    e["last_seen_ms"] = d.seen_last_ms;
    gone.push_back(std::move(e));
  }
}

}  // namespace kwd::probes::linux_proc
