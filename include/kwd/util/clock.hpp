#pragma once

#include <cstdint>
#include <string>

namespace kwd::util {

// Milliseconds since the Unix epoch (wall clock): what reports and people read.
std::int64_t wall_ms();
// Monotonic nanoseconds: what intervals and deadlines are measured with.
std::int64_t steady_ns();
inline std::int64_t steady_ms() {
  return steady_ns() / 1'000'000;
}

// "2026-11-21T18:05:12.345Z"
std::string iso8601_utc(std::int64_t unix_ms);
// "20261121T180512Z": sortable and safe in file names.
std::string compact_utc(std::int64_t unix_ms);

}  // namespace kwd::util
