#include "kwd/probes/linux/oom_killer_probe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "kwd/platform/linux/cgroup_fs.hpp"
#include "kwd/probes/host_sources.hpp"
#include "kwd/probes/linux/kernel_log.hpp"
#include "kwd/probes/linux/kernel_log_feed.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::probes::linux_proc {

using platform::linux_proc::memory_cgroup_at;

namespace {

// How long to wait after a SIGKILL for the kernel's "Killed process" line.
constexpr std::int64_t kGraceAfterKillMs = 300;

}  // namespace

OomKillerProbe::OomKillerProbe(const ProbeOptions& options, const std::string& kmsg_path)
    : feed_(host_source<KernelLogFeed>(
          options.host, kmsg_path, [&] { return std::make_shared<KernelLogFeed>(kmsg_path); },
          [](const KernelLogFeed& feed) { return !feed.valid(); })),
      processes_(options.processes ? options.processes
                                   : std::make_shared<KernelProcesses>(options.kernel_pid)),
      interval_ms_(options.slow_interval.count()) {
  if (!feed_->valid()) {
    reason_ = feed_->problem() + "; OOM kills are seen only through the cgroup's counter";
    return;
  }
  if (!options.cgroup_path.empty()) {
    if (const auto cg = memory_cgroup_at(options.cgroup_path, options.proc_root))
      exclusive_cgroup_path_ = cg->path;
  }
  // Only what happens from now on concerns this kernel.
  feed_->read_new();
  cursor_ = feed_->end();
  lost_before_ = feed_->records_lost();
  reason_ = kmsg_path + ", read non-blocking every " + std::to_string(interval_ms_) +
            " ms and when the kernel dies; after a SIGKILL ";
  reason_ += feed_->counts_oom_kills()
                 ? "it waits for the OOM killer's line only while /proc/vmstat's oom_kill "
                   "counts a kill whose line has not come yet"
                 : "it waits up to " + std::to_string(kGraceAfterKillMs) +
                       " ms for the OOM killer's line (/proc/vmstat has no oom_kill count "
                       "to tell whether one is coming)";
}

OomKillerProbe::~OomKillerProbe() = default;

ProbeStatus OomKillerProbe::status() const {
  return {"linux.oom_killer", feed_->valid(), reason_};
}

bool OomKillerProbe::ours(pid_t pid) const {
  return processes_->belongs(pid) ||
         std::find(adopted_.begin(), adopted_.end(), pid) != adopted_.end();
}

bool OomKillerProbe::drain(bool now) {
  if (!feed_->valid()) return false;
  feed_->read_new(now ? 0 : interval_ms_);
  bool found = false;
  missed_ += static_cast<std::int64_t>(feed_->follow(cursor_, [&](const KernelLogFeed::Entry& e) {
    const std::string_view message = e.message;
    if (e.oom.kind == OomLineKind::summary && !exclusive_cgroup_path_.empty() &&
        adopted_.size() < kLinesKept && !ours(e.oom.pid) &&
        message.find(",task_memcg=" + exclusive_cgroup_path_ + ",") != std::string_view::npos)
      adopted_.push_back(e.oom.pid);
    if (!ours(e.oom.pid)) {
      if (e.oom.kind == OomLineKind::killed) ++other_kills_;
      return;
    }
    if (lines_.size() < kLinesKept) lines_.push_back(e.message);
    if (e.oom.kind == OomLineKind::killed) {
      if (std::find(killed_pids_.begin(), killed_pids_.end(), e.oom.pid) == killed_pids_.end())
        killed_pids_.push_back(e.oom.pid);
      if (e.oom.pid == processes_->root() && e.oom.rss_bytes) kernel_rss_at_kill_ = e.oom.rss_bytes;
      found = true;
    }
  }));
  return found;
}

void OomKillerProbe::sample(timeline::MemorySample& /*into*/) {
  // The kernel's ring holds far more than a second of messages, and what matters is read
  // again at the kernel's death: once a second is enough.
  drain(false);
}

void OomKillerProbe::catch_up() {
  drain(true);
}

void OomKillerProbe::on_kernel_exit(const KernelExit& how) {
  const bool found = drain(true);
  if (!feed_->valid() || found || !how.signaled || how.signal != SIGKILL) return;
  if (root_named()) return;
  // Was it the OOM killer? It counts a kill before it signals the victim and logs the
  // victim's line just after: only while a kill counted by now has no line read yet may the
  // kernel's line still come. Without the count, every SIGKILL waits for it (up to the grace).
  const auto counted = feed_->oom_kills_counted();
  const auto line_due = [&] { return !counted || *counted > feed_->kill_lines_read(); };
  if (counted) kills_unlogged_at_death_ = *counted - feed_->kill_lines_read();
  waited_for_kernel_log_ms_ = 0;
  if (!line_due()) return;
  const std::int64_t start = util::steady_ms();
  const std::int64_t deadline = start + kGraceAfterKillMs;
  for (std::int64_t now = start; now < deadline; now = util::steady_ms()) {
    pollfd p{feed_->fd(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(deadline - now)) <= 0) break;
    drain(true);
    if (root_named() || !line_due()) break;
  }
  waited_for_kernel_log_ms_ = util::steady_ms() - start;
}

bool OomKillerProbe::root_named() const {
  return std::find(killed_pids_.begin(), killed_pids_.end(), processes_->root()) !=
         killed_pids_.end();
}

void OomKillerProbe::contribute(nlohmann::json& report) const {
  using nlohmann::json;
  // Evidence only: whether it adds up to an OOM kill of the kernel is the diagnosis's to
  // decide (diagnosis/rules.cpp), in one place, with the cgroup's counter next to it.
  const auto opt = [](const std::optional<std::int64_t>& v) {
    return v ? json(*v) : json(nullptr);
  };
  report["oom_evidence"] = {
      {"kernel_log", lines_},
      {"matched_pids", killed_pids_},
      {"kernel_pid_named", root_named()},
      {"kernel_log_readable", feed_->valid()},
      {"kernel_log_problem", feed_->valid() ? json(nullptr) : json(feed_->problem())},
      {"kernel_log_failed",
       feed_->read_failure().empty() ? json(nullptr) : json(feed_->read_failure())},
      {"other_oom_kills_seen", other_kills_},
      {"kernel_log_records_lost", feed_->records_lost() - lost_before_ + missed_},
      {"oom_kills_unlogged_at_death", opt(kills_unlogged_at_death_)},
      {"waited_for_kernel_log_ms", opt(waited_for_kernel_log_ms_)},
      {"kernel_rss_at_kill_bytes", opt(kernel_rss_at_kill_)}};
}

}  // namespace kwd::probes::linux_proc
