#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kwd/probes/linux/pressure.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::probes::linux_proc {

// The machine's memory: MemTotal, MemAvailable and swap from /proc/meminfo, pressure from
// /proc/pressure/memory. Both files stay open and are re-read with pread, at most once per
// the age a reader allows: one reader per process (a HostSources source), however many
// kernels are watched.
class SystemMemoryReader {
 public:
  explicit SystemMemoryReader(const std::string& proc_root);

  // Re-reads both files if the last read is older than `min_age_ms` (0: now).
  void refresh(std::int64_t min_age_ms);

  [[nodiscard]] bool readable() const { return meminfo_fd_ && mem_total >= 0; }

  std::int64_t mem_total = -1, mem_available = -1, swap_total = -1, swap_free = -1;
  std::optional<Pressure> pressure;

 private:
  util::UniqueFd meminfo_fd_;
  util::UniqueFd pressure_fd_;
  std::int64_t last_read_ms_ = -1;
  std::string buffer_;
};

}  // namespace kwd::probes::linux_proc
