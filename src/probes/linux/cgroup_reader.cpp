#include "kwd/probes/linux/cgroup_reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "kwd/platform/linux/procfs.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::probes::linux_proc {

using platform::linux_proc::MemoryCgroup;
using platform::linux_proc::parse_flat_keyed;
using platform::linux_proc::parse_memory_limit;
using platform::linux_proc::parse_number;
using platform::linux_proc::pread_all;

namespace {

util::UniqueFd open_read(const std::string& path) {
  return util::UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
}

std::optional<std::string_view> reread(const util::UniqueFd& fd) {
  static thread_local std::string buf;
  if (!fd) return std::nullopt;
  return pread_all(fd.get(), buf);
}

bool due(std::int64_t last_ms, std::int64_t min_age_ms, std::int64_t now_ms) {
  return last_ms < 0 || min_age_ms <= 0 || now_ms - last_ms >= min_age_ms;
}

}  // namespace

CgroupReader::CgroupReader(MemoryCgroup cgroup, const std::string& pressure_file)
    : cgroup_(std::move(cgroup)) {
  const bool v2 = cgroup_.version == 2;
  usage_fd_ = open_read(cgroup_.dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
  if (!usage_fd_) {
    open_error_ = errno;
    return;
  }
  if (!pressure_file.empty()) pressure_fd_ = open_read(pressure_file);
  for (const auto& dir : platform::linux_proc::limiting_dirs(cgroup_))
    if (auto fd = open_read(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes")))
      limit_files_.push_back({dir, std::move(fd)});
  events_fd_ = open_read(cgroup_.dir + (v2 ? "/memory.events" : "/memory.oom_control"));
  if (!v2) failcnt_fd_ = open_read(cgroup_.dir + "/memory.failcnt");
  peak_fd_ = open_read(cgroup_.dir + (v2 ? "/memory.peak" : "/memory.max_usage_in_bytes"));
}

void CgroupReader::read_stat_too() {
  if (!stat_fd_ && usable()) stat_fd_ = open_read(cgroup_.dir + "/memory.stat");
}

namespace {

// The cgroup's own counters (v1's hierarchical ones start with "total_"; a cgroup the
// watchdog made has no children). Page cache: active_file + inactive_file, in v1 and v2.
// Pages read back: file refaults only (an anon refault is a swap-in, not the kernel's code
// read again), named workingset_refault_file since Linux 5.9 and workingset_refault before,
// in v2; v1 has them only since 6.1. Without them, major faults (pgmajfault, in both and on
// every kernel) stand in: each one is a page read from disk.
void read_stat(const std::map<std::string, std::int64_t>& stat,
               std::optional<std::int64_t>& file_cache, std::optional<std::int64_t>& refaults) {
  const auto value = [&stat](const char* key) -> std::optional<std::int64_t> {
    const auto it = stat.find(key);
    if (it == stat.end()) return std::nullopt;
    return it->second;
  };
  const auto active = value("active_file"), inactive = value("inactive_file");
  file_cache = active && inactive ? std::optional(*active + *inactive) : std::nullopt;
  refaults = value("workingset_refault_file");
  if (!refaults) refaults = value("workingset_refault");
  if (!refaults) refaults = value("pgmajfault");
}

}  // namespace

void CgroupReader::refresh_slow(std::int64_t min_age_ms) {
  const std::int64_t now = util::steady_ms();
  if (!usable() || !due(slow_read_ms_, min_age_ms, now)) return;
  slow_read_ms_ = now;
  // The limit in force is the tightest along the path: a parent's limit caps its children.
  limit.reset();
  limit_set_at.clear();
  for (const auto& file : limit_files_) {
    const auto text = reread(file.fd);
    if (!text) continue;
    if (const auto found = parse_memory_limit(*text); found && (!limit || *found < *limit)) {
      limit = found;
      limit_set_at = file.dir;
    }
  }
  if (const auto text = reread(peak_fd_)) max_usage = parse_number(*text);
  if (const auto text = reread(events_fd_)) {
    events = parse_flat_keyed(*text);
    events.erase("oom_kill_disable");  // v1 memory.oom_control: a setting, not an event
  }
  if (const auto text = reread(failcnt_fd_))
    if (const auto failcnt = parse_number(*text)) events["failcnt"] = *failcnt;
  if (const auto text = reread(pressure_fd_)) pressure = parse_pressure(*text);
  if (const auto text = reread(stat_fd_)) read_stat(parse_flat_keyed(*text), file_cache, refaults);
}

void CgroupReader::refresh_usage(std::int64_t min_age_ms) {
  const std::int64_t now = util::steady_ms();
  if (!usable() || !due(usage_read_ms_, min_age_ms, now)) return;
  usage_read_ms_ = now;
  if (const auto text = reread(usage_fd_))
    if (const auto v = parse_number(*text)) usage = *v;
}

}  // namespace kwd::probes::linux_proc
