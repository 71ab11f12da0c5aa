#include "kwd/probes/linux/oom_kill_count.hpp"

#include <fcntl.h>

#include <algorithm>
#include <charconv>

#include "kwd/platform/linux/procfs.hpp"

namespace kwd::probes::linux_proc {

using platform::linux_proc::pread_to_end;

OomKillCount::OomKillCount(const std::string& path)
    : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}

std::optional<std::int64_t> OomKillCount::read() {
  if (!fd_) return std::nullopt;
  const auto text = pread_to_end(fd_.get(), buf_);
  if (!text) return std::nullopt;
  return parse_vmstat_oom_kill(*text);
}

std::optional<std::int64_t> parse_vmstat_oom_kill(std::string_view vmstat) {
  constexpr std::string_view key = "oom_kill ";
  for (std::size_t at = 0; at < vmstat.size();) {
    const std::size_t end = std::min(vmstat.find('\n', at), vmstat.size());
    const auto line = vmstat.substr(at, end - at);
    if (line.starts_with(key)) {
      std::int64_t value = 0;
      const auto digits = line.substr(key.size());
      const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (ec != std::errc() || p == digits.data()) return std::nullopt;
      return value;
    }
    at = end + 1;
  }
  return std::nullopt;
}

}  // namespace kwd::probes::linux_proc
