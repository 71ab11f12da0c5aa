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

// "2026-11-21T18:05:12.345Z" (for dates from 1970 on: callers leave unknown ones out)
std::string iso8601_utc(std::int64_t unix_ms);
// "2026-11-21T18:05:12.345678Z": a message's date as nbclient records it in a notebook.
std::string iso8601_utc_us(std::int64_t unix_us);
// "20261121T180512Z": sortable and safe in file names.
std::string compact_utc(std::int64_t unix_ms);
// "2026-11-21 19:05:12 CET": the wall time where the reader is (the TZ of this process).
std::string local_wall_time(std::int64_t unix_ms);
// A span as people say it: "0.4 s", "8.3 s", "2 min 5 s", "1 h 3 min", "2 d 4 h".
std::string format_duration(double seconds);

}  // namespace kwd::util
