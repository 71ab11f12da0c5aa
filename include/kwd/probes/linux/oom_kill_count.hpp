#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kwd/util/unique_fd.hpp"

namespace kwd::probes::linux_proc {

// The machine's count of OOM kills since boot: `oom_kill` in /proc/vmstat (Linux 4.13 on),
// kept open and re-read with pread. The kernel raises it before it sends the SIGKILL, so at a
// reap it already counts the kill that caused it.
class OomKillCount {
 public:
  explicit OomKillCount(const std::string& path = "/proc/vmstat");

  // nullopt when the file cannot be read or has no oom_kill line (an older kernel).
  [[nodiscard]] std::optional<std::int64_t> read();

 private:
  util::UniqueFd fd_;
  std::string buf_;
};

// The value of the "oom_kill N" line of /proc/vmstat's text.
std::optional<std::int64_t> parse_vmstat_oom_kill(std::string_view vmstat);

}  // namespace kwd::probes::linux_proc
