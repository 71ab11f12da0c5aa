#include "kwd/probes/linux/recent_processes.hpp"

#include <fcntl.h>

#include <charconv>
#include <string_view>
#include <utility>

#include "kwd/probes/linux/procfs.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::probes::linux_proc {

RecentProcesses::RecentProcesses(std::string proc_root)
    : proc_(std::move(proc_root)),
      loadavg_fd_(::open((proc_ + "/loadavg").c_str(), O_RDONLY | O_CLOEXEC)) {}

pid_t RecentProcesses::newest(std::int64_t min_age_ms) {
  const std::int64_t now = util::steady_ms();
  if (newest_read_ms_ >= 0 && min_age_ms > 0 && now - newest_read_ms_ < min_age_ms) return newest_;
  newest_read_ms_ = now;
  newest_ = -1;
  if (!loadavg_fd_) return newest_;
  static thread_local std::string buf;
  const auto text = pread_all(loadavg_fd_.get(), buf);
  if (!text) return newest_;
  std::string_view t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' '))
    t.remove_suffix(1);
  const auto sp = t.rfind(' ');
  if (sp != std::string_view::npos) t.remove_prefix(sp + 1);
  pid_t pid = -1;
  if (std::from_chars(t.data(), t.data() + t.size(), pid).ec == std::errc()) newest_ = pid;
  return newest_;
}

RecentProcesses::Known& RecentProcesses::lookup(pid_t pid) {
  const std::int64_t now = util::steady_ms();
  forget_old(now);
  auto [it, added] = known_.try_emplace(pid);
  Known& k = it->second;
  if (!added && now - k.read_ms < kKeepMs) return k;
  k = Known{};
  k.read_ms = now;
  if (const auto text = read_small_file(proc_ + "/" + std::to_string(pid) + "/stat"))
    if (const auto st = parse_proc_stat(*text)) k.ppid = st->ppid;
  return k;
}

std::optional<pid_t> RecentProcesses::parent_of(pid_t pid) {
  const Known& k = lookup(pid);
  if (k.ppid < 0) return std::nullopt;
  return k.ppid;
}

bool RecentProcesses::is_process(pid_t pid) {
  Known& k = lookup(pid);
  if (k.leader < 0) {
    const auto status = read_small_file(proc_ + "/" + std::to_string(pid) + "/status");
    k.leader = status && find_kb_field(*status, "Tgid") == pid ? 1 : 0;
  }
  return k.leader == 1;
}

void RecentProcesses::forget_old(std::int64_t now_ms) {
  if (now_ms - forgot_at_ms_ < kKeepMs) return;
  forgot_at_ms_ = now_ms;
  std::erase_if(known_,
                [now_ms](const auto& entry) { return now_ms - entry.second.read_ms >= kKeepMs; });
}

}  // namespace kwd::probes::linux_proc
