#include "kwd/probes/linux/recent_processes.hpp"

#include <dirent.h>
#include <fcntl.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <memory>
#include <string_view>
#include <utility>

#include "kwd/platform/linux/procfs.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/unique_dir.hpp"

namespace kwd::probes::linux_proc {

using platform::linux_proc::find_kb_field;
using platform::linux_proc::parse_proc_stat;
using platform::linux_proc::pread_all;
using platform::linux_proc::read_small_file;

RecentProcesses::RecentProcesses(std::string proc_root)
    : proc_(std::move(proc_root)),
      loadavg_fd_(::open((proc_ + "/loadavg").c_str(), O_RDONLY | O_CLOEXEC)) {}

pid_t RecentProcesses::newest(std::int64_t min_age_ms) {
  const std::int64_t now = util::steady_ms();
  if (newest_read_ms_ >= 0 && min_age_ms > 0 && now - newest_read_ms_ < min_age_ms) return newest_;
  const pid_t before = newest_;
  // The previous reading's pids have had time to appear in /proc (see lookup()).
  if (newest_read_ms_ >= 0 && now - newest_read_ms_ >= kSettleMs) settled_newest_ = before;
  newest_read_ms_ = now;
  ++readings_;
  newest_ = read_newest();
  // No process created since: the listing still has every live one (and perhaps some that
  // have exited since, which a reader finds gone).
  if (newest_ < 0 || newest_ != before) listed_since_newest_ = false;
  if (newest_ >= 0 && before >= 0 && newest_ < before) {
    // Pid numbers wrapped around: what is remembered may be about other processes now.
    known_.clear();
    settled_newest_ = -1;
  }
  return newest_;
}

pid_t RecentProcesses::read_newest() {
  if (!loadavg_fd_) return -1;
  static thread_local std::string buf;
  const auto text = pread_all(loadavg_fd_.get(), buf);
  if (!text) return -1;
  std::string_view t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' '))
    t.remove_suffix(1);
  const auto sp = t.rfind(' ');
  if (sp != std::string_view::npos) t.remove_prefix(sp + 1);
  pid_t pid = -1;
  if (std::from_chars(t.data(), t.data() + t.size(), pid).ec != std::errc()) return -1;
  return pid;
}

const std::vector<RecentProcesses::Listed>* RecentProcesses::processes() {
  if (listed_since_newest_) return &listed_;
  const util::UniqueDir dir(::opendir(proc_.c_str()));
  if (!dir) return nullptr;
  listed_.clear();
  const std::int64_t now = util::steady_ms();
  while (const dirent* e = ::readdir(dir.get())) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    pid_t pid = 0;
    const std::string_view name(e->d_name);
    if (std::from_chars(name.data(), name.data() + name.size(), pid).ec != std::errc()) continue;
    const auto text = read_small_file(proc_ + "/" + std::string(name) + "/stat");
    if (!text) continue;
    const auto st = parse_proc_stat(*text);
    if (!st) continue;
    listed_.push_back({pid, st->ppid});
    Known& k = known_[pid];
    k.ppid = st->ppid;
    k.leader = 1;
    k.read_ms = now;
  }
  listed_since_newest_ = true;
  return &listed_;
}

RecentProcesses::Known& RecentProcesses::lookup(pid_t pid) {
  const std::int64_t now = util::steady_ms();
  forget_old(now);
  auto [it, added] = known_.try_emplace(pid);
  Known& k = it->second;
  const bool unsettled_still_good = k.unsettled && k.reading == readings_ && !settled(pid);
  if (!added && now - k.read_ms < kKeepMs && (!k.unsettled || unsettled_still_good)) return k;
  k = Known{};
  k.read_ms = now;
  errno = 0;
  ++stat_reads_;
  const auto text = read_small_file(proc_ + "/" + std::to_string(pid) + "/stat");
  if (text) {
    if (const auto st = parse_proc_stat(*text)) k.ppid = st->ppid;
    return k;
  }
  // "Gone" is remembered only when sure: the system could say so (not out of descriptors),
  // and the pid was handed out long enough ago to be in /proc if it lived (the newest pid is
  // raised a moment before the new process shows there). Otherwise the next kernel to ask
  // reads it again, rather than lose a child for good.
  const bool gone = errno == ENOENT || errno == ESRCH;
  if (!gone) {
    known_.erase(it);
    unsure_ = Known{};
    unsure_.read_ms = now;
    return unsure_;
  }
  if (!settled(pid)) {
    // Shared with the other probes until the newest pid is read again (they share that
    // reading): each of them asks again at its next look, once the pid has settled.
    k.unsettled = true;
    k.reading = readings_;
  }
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
