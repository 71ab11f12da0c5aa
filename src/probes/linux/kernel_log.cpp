#include "kwd/probes/linux/kernel_log.hpp"

#include <charconv>

namespace kwd::probes::linux_proc {
namespace {

std::optional<pid_t> number_at(std::string_view s, std::size_t pos) {
  if (pos >= s.size()) return std::nullopt;
  pid_t pid = 0;
  const auto [p, ec] = std::from_chars(s.data() + pos, s.data() + s.size(), pid);
  if (ec != std::errc() || p == s.data() + pos || pid <= 0) return std::nullopt;
  return pid;
}

// The sum of "anon-rss:NkB", "file-rss:NkB" and "shmem-rss:NkB" in a kill's line; nothing
// unless all three are there (a kernel that prints less says less).
std::optional<std::int64_t> rss_in_kill_line(std::string_view line) {
  // After the process's name, which is the process's to choose ("(anon-rss:1kB)"): the last
  // " total-vm:" is the kernel's.
  const auto fields = line.rfind(" total-vm:");
  if (fields == std::string_view::npos) return std::nullopt;
  line.remove_prefix(fields);
  std::int64_t total = 0;
  for (const std::string_view key : {"anon-rss:", "file-rss:", "shmem-rss:"}) {
    const auto at = line.find(key);
    if (at == std::string_view::npos) return std::nullopt;
    const char* first = line.data() + at + key.size();
    const char* last = line.data() + line.size();
    std::int64_t kib = 0;
    const auto [p, ec] = std::from_chars(first, last, kib);
    constexpr std::int64_t kMaxKib = std::int64_t{1} << 40;  // 1 PiB: no machine has more
    if (ec != std::errc() || p == first || kib < 0 || kib > kMaxKib ||
        std::string_view(p, last).substr(0, 2) != "kB")
      return std::nullopt;
    total += kib * 1024;
  }
  return total;
}

}  // namespace

std::optional<KmsgRecord> parse_kmsg_record(std::string_view record) {
  const auto semi = record.find(';');
  if (semi == std::string_view::npos) return std::nullopt;
  const auto header = record.substr(0, semi);
  KmsgRecord out;
  // Fields: priority, sequence, timestamp, flags (more may follow in future kernels).
  const auto c1 = header.find(',');
  const auto c2 = c1 == std::string_view::npos ? c1 : header.find(',', c1 + 1);
  const auto c3 = c2 == std::string_view::npos ? c2 : header.find(',', c2 + 1);
  if (c3 == std::string_view::npos) return std::nullopt;
  std::from_chars(header.data() + c1 + 1, header.data() + c2, out.sequence);
  std::from_chars(header.data() + c2 + 1, header.data() + c3, out.since_boot_us);
  auto text = record.substr(semi + 1);
  text = text.substr(0, text.find('\n'));
  out.message = text;
  return out;
}

std::optional<OomLine> parse_oom_line(std::string_view message) {
  // Since Linux 5.0: "Out of memory: Killed process 1234 (python3) total-vm:...", or with
  // "Memory cgroup out of memory: " in front; older kernels print "Killed process 1234 ..."
  // after a separate "Out of memory: Kill process 1234 (...) score N or sacrifice child".
  constexpr std::string_view killed = "Killed process ";
  if (const auto at = message.find(killed); at != std::string_view::npos) {
    if (const auto pid = number_at(message, at + killed.size()))
      return OomLine{OomLineKind::killed, *pid, rss_in_kill_line(message.substr(at))};
  }
  constexpr std::string_view summary = "oom-kill:";
  if (message.starts_with(summary)) {
    constexpr std::string_view key = ",pid=";
    if (const auto at = message.find(key); at != std::string_view::npos) {
      if (const auto pid = number_at(message, at + key.size()))
        return OomLine{OomLineKind::summary, *pid, std::nullopt};
    }
  }
  constexpr std::string_view reaped = "oom_reaper: reaped process ";
  if (message.starts_with(reaped)) {
    if (const auto pid = number_at(message, reaped.size()))
      return OomLine{OomLineKind::reaped, *pid, std::nullopt};
  }
  return std::nullopt;
}

}  // namespace kwd::probes::linux_proc
