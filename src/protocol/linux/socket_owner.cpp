#include "kwd/protocol/linux/socket_owner.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

#include "kwd/util/process_args.hpp"

namespace kwd::protocol::linux_net {
namespace {

// A kernel's tree is a handful of processes; this bounds the walk where it is not.
constexpr std::size_t kMaxProcesses = 256;

using Directory = std::unique_ptr<DIR, int (*)(DIR*)>;

// The directory, or null with the reason in `error`.
Directory open_directory(const std::string& path, int& error) {
  Directory dir(::opendir(path.c_str()), ::closedir);
  error = dir ? 0 : errno;
  return dir;
}

// A /proc entry missing is a process gone only when signal 0 says so: with hidepid, the
// processes of other users are missing from /proc too.
bool gone(pid_t pid) {
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

enum class Holds { yes, no, unreadable };

Holds holds_one_of(const std::string& proc, pid_t pid, const SocketInodes& sockets) {
  int error = 0;
  const Directory fds = open_directory(proc + "/" + std::to_string(pid) + "/fd", error);
  if (!fds) return error == ENOENT && gone(pid) ? Holds::no : Holds::unreadable;
  constexpr std::string_view kPrefix = "socket:[";
  char target[64];
  while (const dirent* entry = ::readdir(fds.get())) {
    if (entry->d_name[0] == '.') continue;
    const ssize_t length = ::readlinkat(::dirfd(fds.get()), entry->d_name, target, sizeof target);
    if (length <= 0 || static_cast<std::size_t>(length) >= sizeof target) continue;
    const std::string_view link(target, static_cast<std::size_t>(length));
    if (!link.starts_with(kPrefix) || !link.ends_with(']')) continue;
    std::uint64_t inode = 0;
    const auto [end, ec] =
        std::from_chars(link.data() + kPrefix.size(), link.data() + link.size() - 1, inode);
    if (ec == std::errc() && std::find(sockets.begin(), sockets.end(), inode) != sockets.end())
      return Holds::yes;
  }
  return Holds::no;
}

// The children of `pid`: each thread lists those it forked. False when they cannot be
// listed (no such file on this kernel, or the process is hidden).
bool add_children(const std::string& proc, pid_t pid, std::vector<pid_t>& out) {
  const std::string tasks = proc + "/" + std::to_string(pid) + "/task";
  int error = 0;
  const Directory threads = open_directory(tasks, error);
  if (!threads) return error == ENOENT && gone(pid);
  bool listed = false;
  while (const dirent* entry = ::readdir(threads.get())) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream children(tasks + "/" + entry->d_name + "/children");
    if (!children) continue;
    listed = true;
    for (pid_t child = 0; children >> child;)
      out.push_back(child);
  }
  return listed;
}

}  // namespace

std::optional<bool> process_tree_holds(pid_t root, const SocketInodes& sockets,
                                       const std::string& proc) {
  if (sockets.empty()) return false;
  std::vector<pid_t> pending{root};
  std::size_t looked_at = 0;
  bool complete = true;
  while (!pending.empty() && looked_at < kMaxProcesses) {
    const pid_t pid = pending.back();
    pending.pop_back();
    ++looked_at;
    switch (holds_one_of(proc, pid, sockets)) {
      case Holds::yes:
        return true;
      case Holds::unreadable:
        complete = false;
        break;
      case Holds::no:
        break;
    }
    if (!add_children(proc, pid, pending)) complete = false;
  }
  if (!complete || !pending.empty()) return std::nullopt;
  return false;
}

bool held_by_another_kernel(const SocketInodes& sockets, std::string_view connection_file,
                            const std::string& proc) {
  if (sockets.empty()) return false;
  const auto ours = std::filesystem::path(connection_file).filename();
  int error = 0;
  const Directory processes = open_directory(proc, error);
  if (!processes) return false;
  while (const dirent* entry = ::readdir(processes.get())) {
    pid_t pid = 0;
    const std::string_view name(entry->d_name);
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec != std::errc() || end != name.data() + name.size()) continue;
    // Only a process that names a connection file costs the look at its fds.
    std::ifstream in(proc + "/" + std::string(name) + "/cmdline", std::ios::binary);
    const std::string cmdline{std::istreambuf_iterator<char>(in), {}};
    const auto argv = util::split_nul(cmdline);
    const bool names_a_file = std::any_of(argv.begin(), argv.end(), [](const std::string& a) {
      return a.size() > 5 && a.ends_with(".json");
    });
    // By file name: a kernel may name it relative to its working directory, or as --f=PATH.
    const bool names_ours = std::any_of(argv.begin(), argv.end(), [&](const std::string& a) {
      return std::filesystem::path(a).filename() == ours;
    });
    if (names_a_file && !names_ours && holds_one_of(proc, pid, sockets) == Holds::yes) return true;
  }
  return false;
}

}  // namespace kwd::protocol::linux_net
