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

#include "kwd/probes/linux/cgroup_fs.hpp"
#include "kwd/probes/linux/kernel_log.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::probes::linux_proc {
namespace {

// How long to wait after a SIGKILL for the kernel's "Killed process" line.
constexpr std::int64_t kGraceAfterKillMs = 300;

}  // namespace

OomKillerProbe::OomKillerProbe(const ProbeOptions& options, const std::string& kmsg_path)
    : kmsg_(::open(kmsg_path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)),
      processes_(options.processes ? options.processes
                                   : std::make_shared<KernelProcesses>(options.kernel_pid)),
      interval_ms_(options.slow_interval.count()) {
  if (!kmsg_) {
    reason_ = "cannot read " + kmsg_path + " (" + std::strerror(errno) +
              "); OOM kills are seen only through the cgroup's counter";
    return;
  }
  if (!options.cgroup_path.empty()) {
    if (const auto cg = memory_cgroup_at(options.cgroup_path, options.proc_root))
      exclusive_cgroup_path_ = cg->path;
  }
  // Only what happens from now on concerns this kernel.
  ::lseek(kmsg_.get(), 0, SEEK_END);
  reason_ = kmsg_path + ", read non-blocking every " + std::to_string(interval_ms_) +
            " ms and when the kernel dies";
}

ProbeStatus OomKillerProbe::status() const {
  return {"linux.oom_killer", kmsg_.valid(), reason_};
}

bool OomKillerProbe::ours(pid_t pid) const {
  return processes_->belongs(pid) ||
         std::find(adopted_.begin(), adopted_.end(), pid) != adopted_.end();
}

bool OomKillerProbe::drain() {
  if (!kmsg_) return false;
  bool found = false;
  std::array<char, 8192> buf;  // a record is at most 1 KiB of text plus its dictionary
  for (;;) {
    const ssize_t n = ::read(kmsg_.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE) {  // the ring overwrote records before we read them
        ++records_lost_;
        continue;
      }
      break;  // EAGAIN: nothing more now
    }
    if (n == 0) break;
    const auto record =
        parse_kmsg_record(std::string_view(buf.data(), static_cast<std::size_t>(n)));
    if (!record) continue;
    const auto oom = parse_oom_line(record->message);
    if (!oom) continue;
    if (oom->kind == OomLineKind::summary && !exclusive_cgroup_path_.empty() &&
        adopted_.size() < kLinesKept && !ours(oom->pid) &&
        record->message.find(",task_memcg=" + exclusive_cgroup_path_ + ",") !=
            std::string_view::npos)
      adopted_.push_back(oom->pid);
    if (!ours(oom->pid)) {
      if (oom->kind == OomLineKind::killed) ++other_kills_;
      continue;
    }
    if (lines_.size() < kLinesKept) lines_.emplace_back(record->message);
    if (oom->kind == OomLineKind::killed) {
      if (std::find(killed_pids_.begin(), killed_pids_.end(), oom->pid) == killed_pids_.end())
        killed_pids_.push_back(oom->pid);
      found = true;
    }
  }
  return found;
}

void OomKillerProbe::sample(timeline::MemorySample& /*into*/) {
  // The kernel's ring holds far more than a second of messages, and what matters is read
  // again at the kernel's death: once a second is enough.
  const std::int64_t now = util::steady_ms();
  if (last_drain_ms_ >= 0 && now - last_drain_ms_ < interval_ms_) return;
  last_drain_ms_ = now;
  drain();
}

void OomKillerProbe::on_kernel_exit(const KernelExit& how) {
  const bool found = drain();
  if (!kmsg_ || found || !how.signaled || how.signal != SIGKILL) return;
  const auto root_named = [this] {
    return std::find(killed_pids_.begin(), killed_pids_.end(), processes_->root()) !=
           killed_pids_.end();
  };
  if (root_named()) return;
  const std::int64_t deadline = util::steady_ms() + kGraceAfterKillMs;
  for (std::int64_t now = util::steady_ms(); now < deadline; now = util::steady_ms()) {
    pollfd p{kmsg_.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(deadline - now)) <= 0) break;
    drain();
    if (root_named()) break;
  }
}

void OomKillerProbe::contribute(nlohmann::json& report) const {
  using nlohmann::json;
  // Evidence only: whether it adds up to an OOM kill of the kernel is the diagnosis's to
  // decide (diagnosis/rules.cpp), in one place, with the cgroup's counter next to it.
  const bool kernel_itself =
      std::find(killed_pids_.begin(), killed_pids_.end(), processes_->root()) != killed_pids_.end();
  report["oom_evidence"] = {{"kernel_log", lines_},
                            {"matched_pids", killed_pids_},
                            {"kernel_pid_named", kernel_itself},
                            {"kernel_log_readable", kmsg_.valid()},
                            {"other_oom_kills_seen", other_kills_},
                            {"kernel_log_records_lost", records_lost_}};
}

}  // namespace kwd::probes::linux_proc
