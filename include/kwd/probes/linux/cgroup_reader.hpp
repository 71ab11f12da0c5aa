#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kwd/platform/linux/cgroup_fs.hpp"
#include "kwd/probes/linux/pressure.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::probes::linux_proc {

// One memory cgroup's files, v2 or v1, kept open (opening cgroupfs files costs more than
// reading them) and re-read with pread at most once per the age a reader allows: one reader
// per cgroup while a kernel in it is watched (a HostSources source), so a daemon watching
// fifty kernels of one desktop session reads that session's cgroup once per sample period,
// not fifty times.
class CgroupReader {
 public:
  // `pressure_file`: the cgroup's memory.pressure, empty where there is none of its own.
  CgroupReader(platform::linux_proc::MemoryCgroup cgroup, const std::string& pressure_file);

  // The usage file could be opened: the reader has something to say.
  [[nodiscard]] bool usable() const { return static_cast<bool>(usage_fd_); }
  // errno of the failed open of the usage file.
  [[nodiscard]] int open_error() const { return open_error_; }
  [[nodiscard]] const platform::linux_proc::MemoryCgroup& cgroup() const { return cgroup_; }
  [[nodiscard]] bool has_pressure_file() const { return static_cast<bool>(pressure_fd_); }
  // memory.stat is read too, from now on, at the slow rate (page cache and refaults): only
  // for a cgroup the watchdog made, where a thrash is the watchdog's to end (a few dozen
  // lines a second, for one kernel; a daemon's shared cgroups never read it).
  void read_stat_too();

  // Re-read the limits along the path, the high-water mark, the event counters and the
  // pressure if the last read is older than `min_age_ms` (0: now).
  void refresh_slow(std::int64_t min_age_ms);
  // Re-read the usage if the last read is older than `min_age_ms` (0: now).
  void refresh_usage(std::int64_t min_age_ms);

  std::int64_t usage = -1;
  std::optional<std::int64_t> limit;  // the tightest along the path up to the top
  std::string limit_set_at;           // the cgroup whose limit that is
  std::optional<std::int64_t> max_usage;
  std::map<std::string, std::int64_t> events;
  std::optional<Pressure> pressure;
  // From memory.stat, once read_stat_too(): active + inactive file pages, in bytes, and the
  // file pages read back after their eviction (or, where the kernel does not count those
  // for the cgroup, its major faults), a count.
  std::optional<std::int64_t> file_cache;
  std::optional<std::int64_t> refaults;

 private:
  platform::linux_proc::MemoryCgroup cgroup_;
  int open_error_ = 0;
  util::UniqueFd usage_fd_;
  struct LimitFile {
    std::string dir;
    util::UniqueFd fd;
  };
  std::vector<LimitFile> limit_files_;  // the cgroup's and every ancestor's, up to the top
  util::UniqueFd events_fd_;            // v2 memory.events, v1 memory.oom_control
  util::UniqueFd failcnt_fd_;           // v1 memory.failcnt
  util::UniqueFd peak_fd_;              // v2 memory.peak, v1 memory.max_usage_in_bytes
  util::UniqueFd pressure_fd_;
  util::UniqueFd stat_fd_;
  std::int64_t slow_read_ms_ = -1;
  std::int64_t usage_read_ms_ = -1;
};

}  // namespace kwd::probes::linux_proc
