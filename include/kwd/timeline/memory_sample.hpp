#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace kwd::timeline {

inline constexpr std::int64_t kUnknown = -1;

// One reading of everything the probes could see at one instant. Bytes unless noted;
// kUnknown where no probe could tell.
struct MemorySample {
  std::int64_t t_ms = 0;              // wall clock, ms since the epoch
  std::int64_t rss = kUnknown;        // the kernel's whole process tree
  std::int64_t swap = kUnknown;       // ditto
  std::int64_t pss = kUnknown;        // ditto, sampled at a lower rate (carried forward)
  std::int64_t processes = kUnknown;  // count
  std::int64_t threads = kUnknown;    // count
  std::int64_t cgroup_usage = kUnknown;
  std::int64_t cgroup_limit = kUnknown;
  std::int64_t mem_available = kUnknown;    // system MemAvailable
  std::int64_t psi_some_avg10 = kUnknown;   // memory pressure, percent x 100
  std::int64_t gpu_used = kUnknown;         // GPU memory held by the kernel's processes
  std::int64_t gpu_device_used = kUnknown;  // all devices, all processes
  std::int64_t gpu_total = kUnknown;        // all devices
  std::int64_t unified_in_use = kUnknown;   // Apple: IOAccelerator in-use system memory
  std::int64_t phys_footprint = kUnknown;   // Apple: the tree's footprint (Metal buffers too)

  // Not series: the ceilings the limits are computed against (carried on every sample so
  // the last one before death says what was in force).
  std::int64_t mem_total = kUnknown;  // system MemTotal
  // A memory cgroup the watchdog made for the kernel (--memory-limit), read at the slow rate:
  // its page cache on the LRU lists (what reclaim can take without swap), and the file pages
  // it has read back because they had been evicted (workingset refaults; major faults where
  // the kernel has no such counter for it). The thrash guard judges by them.
  std::int64_t cgroup_file_cache = kUnknown;
  std::int64_t cgroup_refaults = kUnknown;
  // When the GPU readings above were taken: the GPU is sampled on a thread of its own at its
  // own rate, so they can be older than t_ms. kUnknown: taken at t_ms.
  std::int64_t gpu_sampled_at_ms = kUnknown;
};

struct SeriesField {
  std::string_view name;
  std::int64_t MemorySample::*member;
};

// The series a report carries, in the order it carries them.
inline constexpr std::array<SeriesField, 14> kSeriesFields{{
    {"rss", &MemorySample::rss},
    {"swap", &MemorySample::swap},
    {"pss", &MemorySample::pss},
    {"processes", &MemorySample::processes},
    {"threads", &MemorySample::threads},
    {"cgroup_usage", &MemorySample::cgroup_usage},
    {"cgroup_limit", &MemorySample::cgroup_limit},
    {"mem_available", &MemorySample::mem_available},
    {"psi_some_avg10", &MemorySample::psi_some_avg10},
    {"gpu_used", &MemorySample::gpu_used},
    {"gpu_device_used", &MemorySample::gpu_device_used},
    {"gpu_total", &MemorySample::gpu_total},
    {"unified_in_use", &MemorySample::unified_in_use},
    {"phys_footprint", &MemorySample::phys_footprint},
}};

}  // namespace kwd::timeline
