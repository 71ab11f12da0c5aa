#include "kwd/protocol/linux/socket_owner.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <memory>
#include <string_view>
#include <vector>

namespace kwd::protocol::linux_net {
namespace {

// A kernel's tree is a handful of processes; this bounds the walk where it is not.
constexpr std::size_t kMaxProcesses = 256;

using Directory = std::unique_ptr<DIR, int (*)(DIR*)>;

Directory open_directory(const std::string& path) {
  return {::opendir(path.c_str()), ::closedir};
}

enum class Holds { yes, no, unreadable };

Holds holds_one_of(const std::string& proc, pid_t pid, const SocketInodes& sockets) {
  const Directory fds = open_directory(proc + "/" + std::to_string(pid) + "/fd");
  // A process gone meanwhile holds nothing any more.
  if (!fds) return errno == ENOENT || errno == ESRCH ? Holds::no : Holds::unreadable;
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

// The children of `pid`: each thread lists those it forked. False when this kernel does not
// list children at all.
bool add_children(const std::string& proc, pid_t pid, std::vector<pid_t>& out) {
  const std::string tasks = proc + "/" + std::to_string(pid) + "/task";
  const Directory threads = open_directory(tasks);
  if (!threads) return errno == ENOENT || errno == ESRCH;
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

}  // namespace kwd::protocol::linux_net
