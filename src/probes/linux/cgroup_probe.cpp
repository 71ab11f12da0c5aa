#include "kwd/probes/linux/cgroup_probe.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "kwd/probes/linux/procfs.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::probes::linux_proc {
namespace {

std::optional<std::int64_t> read_number(const std::string& path) {
  const auto text = read_small_file(path);
  return text ? parse_number(*text) : std::nullopt;
}

std::string parent_of(const std::string& dir) {
  const auto slash = dir.rfind('/');
  return slash == std::string::npos || slash == 0 ? std::string("/") : dir.substr(0, slash);
}

}  // namespace

CgroupProbe::CgroupProbe(const ProbeOptions& options)
    : interval_ms_(options.slow_interval.count()) {
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
    reason_ = "cannot read " + usage_file;
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
  if (!pressure_file_.empty() && ::access(pressure_file_.c_str(), R_OK) != 0)
    pressure_file_.clear();
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
  const bool v2 = cgroup_->version == 2;
  // The limit in force is the tightest along the path: a parent's limit caps its children.
  limit_.reset();
  limit_set_at_.clear();
  for (std::string dir = cgroup_->dir;; dir = parent_of(dir)) {
    const auto text = read_small_file(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
    if (text) {
      if (const auto limit = parse_memory_limit(*text); limit && (!limit_ || *limit < *limit_)) {
        limit_ = limit;
        limit_set_at_ = dir;
      }
    }
    if (dir == cgroup_->top_dir || dir.size() <= cgroup_->top_dir.size()) break;
  }
  max_usage_ = read_number(cgroup_->dir + (v2 ? "/memory.peak" : "/memory.max_usage_in_bytes"));
  if (v2) {
    if (const auto text = read_small_file(cgroup_->dir + "/memory.events"))
      events_ = parse_flat_keyed(*text);
  } else {
    events_.clear();
    if (const auto text = read_small_file(cgroup_->dir + "/memory.oom_control"))
      events_ = parse_flat_keyed(*text);
    events_.erase("oom_kill_disable");
    if (const auto failcnt = read_number(cgroup_->dir + "/memory.failcnt"))
      events_["failcnt"] = *failcnt;
  }
  if (!pressure_file_.empty()) {
    if (const auto text = read_small_file(pressure_file_)) pressure_ = parse_pressure(*text);
  }
}

void CgroupProbe::sample(timeline::MemorySample& into) {
  if (!cgroup_) return;
  static thread_local std::string buf;
  if (const auto text = pread_all(usage_fd_.get(), buf))
    if (const auto v = parse_number(*text)) usage_ = *v;
  const std::int64_t now = util::steady_ms();
  if (last_slow_ms_ < 0 || now - last_slow_ms_ >= interval_ms_) {
    last_slow_ms_ = now;
    read_slow();
  }
  if (usage_ >= 0) into.cgroup_usage = usage_;
  if (limit_) into.cgroup_limit = *limit_;
}

void CgroupProbe::on_kernel_exit(const KernelExit& /*how*/) {
  if (!cgroup_) return;
  read_slow();
  // The kernel raises the counter before it sends the SIGKILL, so it is up to date now.
  oom_kill_after_ = read_oom_kill();
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
}

}  // namespace kwd::probes::linux_proc
