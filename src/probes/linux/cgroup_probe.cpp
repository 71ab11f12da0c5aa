#include "kwd/probes/linux/cgroup_probe.hpp"

#include <nlohmann/json.hpp>

#include "kwd/platform/linux/procfs.hpp"
#include "kwd/probes/host_sources.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/errno_text.hpp"

namespace kwd::probes::linux_proc {

using platform::linux_proc::cgroup_mounts;
using platform::linux_proc::memory_cgroup_at;
using platform::linux_proc::memory_cgroup_of;
using platform::linux_proc::MemoryCgroup;
using platform::linux_proc::parse_flat_keyed;
using platform::linux_proc::read_small_file;
using platform::linux_proc::unified_dir_of;

namespace {

// Under a limit the usage is what the OOM killer judges, read at every sample; kernels of
// one cgroup sampled within this of each other share a reading.
constexpr std::int64_t kUsageShareMs = 5;

}  // namespace

CgroupProbe::CgroupProbe(const ProbeOptions& options)
    : interval_ms_(options.slow_interval.count()),
      processes_(options.processes),
      proc_root_(options.proc_root) {
  std::optional<MemoryCgroup> cgroup;
  if (!options.cgroup_path.empty()) {
    // Ours: the kernel may not have entered it yet when probes are made.
    cgroup = memory_cgroup_at(options.cgroup_path, options.proc_root);
    created_by_watchdog_ = cgroup.has_value();
  }
  if (!cgroup) cgroup = memory_cgroup_of(options.kernel_pid, options.proc_root);
  if (!cgroup) {
    reason_ =
        "the kernel is in no memory cgroup this process can read (no memory controller "
        "mounted, or another cgroup namespace)";
    return;
  }
  std::string pressure_file;
  if (cgroup->version == 2) {
    pressure_file = cgroup->dir + "/memory.pressure";
  } else if (const auto unified = unified_dir_of(options.kernel_pid, options.proc_root)) {
    // Hybrid: v1 charges the memory, v2 still accounts pressure per cgroup. Its root's
    // pressure is the system's, already reported.
    if (const auto mounts = cgroup_mounts(options.proc_root)) {
      const auto& top = mounts->v2;
      if (top && *unified != top->mount_point) pressure_file = *unified + "/memory.pressure";
    }
  }
  reader_ = host_source_while_used<CgroupReader>(
      options.host, cgroup->dir + '\n' + pressure_file,
      [&] { return std::make_shared<CgroupReader>(*cgroup, pressure_file); });
  if (!reader_->usable()) {
    reason_ = util::cannot(
        "read", cgroup->dir + (cgroup->version == 2 ? "/memory.current" : "/memory.usage_in_bytes"),
        reader_->open_error());
    reader_.reset();
    return;
  }
  oom_kill_before_ = read_oom_kill();
  if (created_by_watchdog_) reader_->read_stat_too();
  reader_->refresh_slow(interval_ms_);
  reason_ = "cgroup v" + std::to_string(cgroup->version) + " " + cgroup->dir +
            (created_by_watchdog_ ? " (made by the watchdog for this kernel)" : "") +
            ": usage every sample, limits/events/pressure every " + std::to_string(interval_ms_) +
            " ms";
}

CgroupProbe::~CgroupProbe() = default;

ProbeStatus CgroupProbe::status() const {
  return {"linux.cgroup", reader_ != nullptr, reason_};
}

std::optional<std::int64_t> CgroupProbe::read_oom_kill() const {
  if (!reader_) return std::nullopt;
  const auto& cgroup = reader_->cgroup();
  const auto text = read_small_file(
      cgroup.dir + (cgroup.version == 2 ? "/memory.events" : "/memory.oom_control"));
  if (!text) return std::nullopt;
  const auto fields = parse_flat_keyed(*text);
  const auto it = fields.find("oom_kill");  // absent from v1 before Linux 4.13
  if (it == fields.end()) return std::nullopt;
  return it->second;
}

std::optional<std::int64_t> CgroupProbe::oom_kill_count() const {
  if (oom_kill_after_) return oom_kill_after_;
  if (reader_) {
    const auto it = reader_->events.find("oom_kill");
    if (it != reader_->events.end()) return it->second;
  }
  return oom_kill_before_;
}

void CgroupProbe::sample(timeline::MemorySample& into) {
  if (!reader_) return;
  reader_->refresh_slow(interval_ms_);
  // Without a limit the usage only follows the tree's RSS (plus page cache): the slow rate
  // is enough.
  reader_->refresh_usage(reader_->limit ? kUsageShareMs : interval_ms_);
  if (reader_->usage >= 0) into.cgroup_usage = reader_->usage;
  if (reader_->limit) into.cgroup_limit = *reader_->limit;
  if (reader_->file_cache) into.cgroup_file_cache = *reader_->file_cache;
  if (reader_->refaults) into.cgroup_refaults = *reader_->refaults;
}

void CgroupProbe::on_kernel_exit(const KernelExit& /*how*/) {
  if (!reader_) return;
  reader_->refresh_slow(0);
  reader_->refresh_usage(0);
  // The kernel raises the counter before it sends the SIGKILL, so it is up to date now.
  oom_kill_after_ = read_oom_kill();
  constexpr std::size_t kNeighboursKept = 5;
  if (processes_ && oom_kill_before_ && oom_kill_after_ && *oom_kill_after_ > *oom_kill_before_)
    neighbours_ =
        cgroup_neighbours(reader_->cgroup().dir, *processes_, kNeighboursKept, proc_root_);
}

void CgroupProbe::contribute(nlohmann::json& report) const {
  using nlohmann::json;
  if (!reader_) {
    report["cgroup"] = nullptr;
    return;
  }
  const CgroupReader& r = *reader_;
  const auto opt = [](const std::optional<std::int64_t>& v) {
    return v ? json(*v) : json(nullptr);
  };
  json pressure = nullptr;
  if (r.pressure) {
    pressure = {
        {"some_avg10", r.pressure->some_avg10},
        {"full_avg10", r.pressure->has_full ? json(r.pressure->full_avg10) : json(nullptr)}};
  }
  const auto after = oom_kill_after_ ? oom_kill_after_ : oom_kill_count();
  json delta = nullptr;
  if (oom_kill_before_ && after) delta = *after - *oom_kill_before_;
  report["cgroup"] = {{"version", r.cgroup().version},
                      {"path", r.cgroup().path},
                      {"dir", r.cgroup().dir},
                      {"created_by_watchdog", created_by_watchdog_},
                      {"usage", r.usage >= 0 ? json(r.usage) : json(nullptr)},
                      {"limit", opt(r.limit)},
                      {"limit_set_at", r.limit ? json(r.limit_set_at) : json(nullptr)},
                      {"max_usage", opt(r.max_usage)},
                      {"oom_kill_before", opt(oom_kill_before_)},
                      {"oom_kill_after", opt(after)},
                      {"oom_kill_delta", delta},
                      {"events", r.events},
                      {"pressure", pressure}};
  report["cgroup"]["other_processes"] =
      neighbours_ ? neighbours_to_json(*neighbours_) : json(nullptr);
}

}  // namespace kwd::probes::linux_proc
