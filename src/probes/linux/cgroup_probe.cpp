#include "kwd/probes/linux/cgroup_probe.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "kwd/probes/linux/procfs.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/errno_text.hpp"

namespace kwd::probes::linux_proc {
namespace {

util::UniqueFd open_read(const std::string& path) {
  return util::UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
}

std::optional<std::string_view> reread(const util::UniqueFd& fd) {
  static thread_local std::string buf;
  if (!fd) return std::nullopt;
  return pread_all(fd.get(), buf);
}

std::string parent_of(const std::string& dir) {
  const auto slash = dir.rfind('/');
  return slash == std::string::npos || slash == 0 ? std::string("/") : dir.substr(0, slash);
}

}  // namespace

CgroupProbe::CgroupProbe(const ProbeOptions& options)
    : interval_ms_(options.slow_interval.count()),
      processes_(options.processes),
      proc_root_(options.proc_root) {
  if (!options.cgroup_path.empty()) {
    // Ours: the kernel may not have entered it yet when probes are made.
    cgroup_ = memory_cgroup_at(options.cgroup_path, options.proc_root);
    created_by_watchdog_ = cgroup_.has_value();
  }
  if (!cgroup_) cgroup_ = memory_cgroup_of(options.kernel_pid, options.proc_root);
  if (!cgroup_) {
    reason_ =
        "the kernel is in no memory cgroup this process can read (no memory controller "
        "mounted, or another cgroup namespace)";
    return;
  }
  const std::string usage_file =
      cgroup_->dir + (cgroup_->version == 2 ? "/memory.current" : "/memory.usage_in_bytes");
  usage_fd_.reset(::open(usage_file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!usage_fd_) {
    reason_ = util::cannot("read", usage_file, errno);
    cgroup_.reset();
    return;
  }
  if (cgroup_->version == 2) {
    pressure_file_ = cgroup_->dir + "/memory.pressure";
  } else if (const auto unified = unified_dir_of(options.kernel_pid, options.proc_root)) {
    // Hybrid: v1 charges the memory, v2 still accounts pressure per cgroup. Its root's
    // pressure is the system's, already reported.
    if (const auto mounts = read_small_file(options.proc_root + "/self/mountinfo")) {
      const auto top = parse_cgroup_mounts(*mounts).v2;
      if (top && *unified != top->mount_point) pressure_file_ = *unified + "/memory.pressure";
    }
  }
  if (!pressure_file_.empty()) {
    pressure_fd_ = open_read(pressure_file_);
    if (!pressure_fd_) pressure_file_.clear();
  }
  const bool v2 = cgroup_->version == 2;
  for (std::string dir = cgroup_->dir;; dir = parent_of(dir)) {
    if (auto fd = open_read(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes")))
      limit_files_.push_back({dir, std::move(fd)});
    if (dir == cgroup_->top_dir || dir.size() <= cgroup_->top_dir.size()) break;
  }
  events_fd_ = open_read(cgroup_->dir + (v2 ? "/memory.events" : "/memory.oom_control"));
  if (!v2) failcnt_fd_ = open_read(cgroup_->dir + "/memory.failcnt");
  peak_fd_ = open_read(cgroup_->dir + (v2 ? "/memory.peak" : "/memory.max_usage_in_bytes"));
  oom_kill_before_ = read_oom_kill();
  read_slow();
  reason_ = "cgroup v" + std::to_string(cgroup_->version) + " " + cgroup_->dir +
            (created_by_watchdog_ ? " (made by the watchdog for this kernel)" : "") +
            ": usage every sample, limits/events/pressure every " + std::to_string(interval_ms_) +
            " ms";
}

ProbeStatus CgroupProbe::status() const {
  return {"linux.cgroup", cgroup_.has_value(), reason_};
}

std::optional<std::int64_t> CgroupProbe::read_oom_kill() const {
  if (!cgroup_) return std::nullopt;
  const auto text = read_small_file(
      cgroup_->dir + (cgroup_->version == 2 ? "/memory.events" : "/memory.oom_control"));
  if (!text) return std::nullopt;
  const auto fields = parse_flat_keyed(*text);
  const auto it = fields.find("oom_kill");  // absent from v1 before Linux 4.13
  if (it == fields.end()) return std::nullopt;
  return it->second;
}

std::optional<std::int64_t> CgroupProbe::oom_kill_count() const {
  if (oom_kill_after_) return oom_kill_after_;
  const auto it = events_.find("oom_kill");
  if (it != events_.end()) return it->second;
  return oom_kill_before_;
}

void CgroupProbe::read_slow() {
  if (!cgroup_) return;
  // The limit in force is the tightest along the path: a parent's limit caps its children.
  limit_.reset();
  limit_set_at_.clear();
  for (const auto& file : limit_files_) {
    const auto text = reread(file.fd);
    if (!text) continue;
    if (const auto limit = parse_memory_limit(*text); limit && (!limit_ || *limit < *limit_)) {
      limit_ = limit;
      limit_set_at_ = file.dir;
    }
  }
  if (const auto text = reread(peak_fd_)) max_usage_ = parse_number(*text);
  if (const auto text = reread(events_fd_)) {
    events_ = parse_flat_keyed(*text);
    events_.erase("oom_kill_disable");  // v1 memory.oom_control: a setting, not an event
  }
  if (const auto text = reread(failcnt_fd_))
    if (const auto failcnt = parse_number(*text)) events_["failcnt"] = *failcnt;
  if (const auto text = reread(pressure_fd_)) pressure_ = parse_pressure(*text);
}

void CgroupProbe::sample(timeline::MemorySample& into) {
  if (!cgroup_) return;
  const std::int64_t now = util::steady_ms();
  const bool slow_due = last_slow_ms_ < 0 || now - last_slow_ms_ >= interval_ms_;
  if (slow_due) {
    last_slow_ms_ = now;
    read_slow();
  }
  // Under a limit the usage is what the OOM killer judges: every sample. Without one it
  // only follows the tree's RSS (plus page cache), and the slow rate is enough.
  if (limit_ || slow_due)
    if (const auto text = reread(usage_fd_))
      if (const auto v = parse_number(*text)) usage_ = *v;
  if (usage_ >= 0) into.cgroup_usage = usage_;
  if (limit_) into.cgroup_limit = *limit_;
}

void CgroupProbe::on_kernel_exit(const KernelExit& /*how*/) {
  if (!cgroup_) return;
  read_slow();
  // The kernel raises the counter before it sends the SIGKILL, so it is up to date now.
  oom_kill_after_ = read_oom_kill();
  constexpr std::size_t kNeighboursKept = 5;
  if (processes_ && oom_kill_before_ && oom_kill_after_ && *oom_kill_after_ > *oom_kill_before_)
    neighbours_ = cgroup_neighbours(cgroup_->dir, *processes_, kNeighboursKept, proc_root_);
}

void CgroupProbe::contribute(nlohmann::json& report) const {
  using nlohmann::json;
  if (!cgroup_) {
    report["cgroup"] = nullptr;
    return;
  }
  const auto opt = [](const std::optional<std::int64_t>& v) {
    return v ? json(*v) : json(nullptr);
  };
  json pressure = nullptr;
  if (pressure_) {
    pressure = {{"some_avg10", pressure_->some_avg10},
                {"full_avg10", pressure_->has_full ? json(pressure_->full_avg10) : json(nullptr)}};
  }
  const auto after = oom_kill_after_ ? oom_kill_after_ : oom_kill_count();
  json delta = nullptr;
  if (oom_kill_before_ && after) delta = *after - *oom_kill_before_;
  report["cgroup"] = {{"version", cgroup_->version},
                      {"path", cgroup_->path},
                      {"dir", cgroup_->dir},
                      {"created_by_watchdog", created_by_watchdog_},
                      {"usage", usage_ >= 0 ? json(usage_) : json(nullptr)},
                      {"limit", opt(limit_)},
                      {"limit_set_at", limit_ ? json(limit_set_at_) : json(nullptr)},
                      {"max_usage", opt(max_usage_)},
                      {"oom_kill_before", opt(oom_kill_before_)},
                      {"oom_kill_after", opt(after)},
                      {"oom_kill_delta", delta},
                      {"events", events_},
                      {"pressure", pressure}};
  report["cgroup"]["other_processes"] =
      neighbours_ ? neighbours_to_json(*neighbours_) : json(nullptr);
}

}  // namespace kwd::probes::linux_proc
