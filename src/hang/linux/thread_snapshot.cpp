#include "kwd/hang/thread_snapshot.hpp"

#include <dirent.h>

#include <algorithm>
#include <charconv>
#include <memory>

#include "kwd/platform/linux/procfs.hpp"
#include "kwd/util/errno_text.hpp"
#include "kwd/util/unique_dir.hpp"

namespace kwd::hang {
namespace {

// One-line procfs files (comm, wchan) without their trailing newline.
std::optional<std::string> read_text(const std::string& path) {
  auto text = platform::linux_proc::read_small_file(path);
  while (text && !text->empty() && (text->back() == '\n' || text->back() == '\0'))
    text->pop_back();
  return text;
}

std::optional<platform::linux_proc::ProcStat> stat_of(const std::string& dir) {
  const auto text = platform::linux_proc::read_small_file(dir + "/stat");
  return text ? platform::linux_proc::parse_proc_stat(*text) : std::nullopt;
}

std::optional<char> state_of(const std::string& dir) {
  const auto stat = stat_of(dir);
  if (!stat) return std::nullopt;
  return stat->state;
}

}  // namespace

bool process_alive(pid_t pid) {
  const auto state = state_of("/proc/" + std::to_string(pid));
  return state && *state != 'Z' && *state != 'X';
}

bool process_stopped(pid_t pid) {
  const auto state = state_of("/proc/" + std::to_string(pid));
  return state && (*state == 'T' || *state == 't');
}

ProcessSnapshot snapshot_process(pid_t pid, std::size_t max_threads) {
  ProcessSnapshot snap;
  const std::string base = "/proc/" + std::to_string(pid);
  errno = 0;
  const auto main_state = state_of(base);
  if (!main_state) {
    snap.reason = util::cannot("read", base + "/stat", errno);
    return snap;
  }
  snap.available = true;
  snap.process_state = describe_state(*main_state);

  const util::UniqueDir tasks(opendir((base + "/task").c_str()));
  if (!tasks) {
    snap.reason = util::cannot("list", base + "/task", errno);
    return snap;
  }
  std::vector<pid_t> tids;
  while (const dirent* entry = readdir(tasks.get())) {
    pid_t tid = 0;
    const std::string_view name(entry->d_name);
    const auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), tid);
    if (ec == std::errc() && p == name.data() + name.size()) tids.push_back(tid);
  }
  // The main thread first (its tid is the pid), then the others by tid: after the pid
  // numbers wrap, a thread started later can have a smaller tid than the process's.
  std::sort(tids.begin(), tids.end(), [pid](pid_t a, pid_t b) {
    return a == pid ? b != pid : b == pid ? false : a < b;
  });
  snap.threads_total = tids.size();
  for (pid_t tid : tids) {
    if (snap.threads.size() >= max_threads) break;
    const std::string dir = base + "/task/" + std::to_string(tid);
    const auto stat = stat_of(dir);
    if (!stat) continue;  // the thread ended meanwhile
    ThreadState t;
    t.tid = tid;
    t.name = stat->comm;  // what /proc/.../comm says, one file fewer per thread
    t.state = describe_state(stat->state);
    // "0" means not blocked in the kernel; unprivileged readers of other users see "0" too.
    t.wchan = read_text(dir + "/wchan").value_or("");
    if (t.wchan == "0") t.wchan.clear();
    snap.threads.push_back(std::move(t));
  }
  return snap;
}

}  // namespace kwd::hang
