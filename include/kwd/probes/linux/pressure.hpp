#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kwd::probes::linux_proc {

// Pressure stall information (/proc/pressure/memory, a v2 cgroup's memory.pressure):
// the share of wall time in which some / all non-idle tasks were stalled on memory.
struct Pressure {
  double some_avg10 = 0, some_avg60 = 0, some_avg300 = 0;
  double full_avg10 = 0, full_avg60 = 0, full_avg300 = 0;
  std::int64_t some_total_us = 0, full_total_us = 0;
  bool has_full = false;  // kernels before 5.13 have no "full" line for the system
};

std::optional<Pressure> parse_pressure(std::string_view text);

}  // namespace kwd::probes::linux_proc
