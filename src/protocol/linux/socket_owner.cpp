#include "kwd/protocol/linux/socket_owner.hpp"

#include <dirent.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

#include "kwd/platform/linux/procfs.hpp"
#include "kwd/protocol/kernel_argv.hpp"
#include "kwd/util/process_args.hpp"
#include "kwd/util/unique_dir.hpp"

namespace kwd::protocol::linux_net {
namespace {

// A kernel's tree is a handful of processes; this bounds the walk where it is not.
constexpr std::size_t kMaxProcesses = 256;

using Directory = util::UniqueDir;

// The directory, or null with the reason in `error`.
Directory open_directory(const std::string& path, int& error) {
  Directory dir(::opendir(path.c_str()));
  error = dir ? 0 : errno;
  return dir;
}

// A /proc entry missing is a process gone only when signal 0 says so: with hidepid, the
// processes of other users are missing from /proc too.
bool gone(pid_t pid) {
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

enum class Holds { yes, no, unreadable };

// Calls f(inode) for each socket among the open files listed in `fds` (/proc/PID/fd); stops
// when f returns true, and returns whether it did.
template <typename F>
bool any_socket(const Directory& fds, F&& f) {
  constexpr std::string_view kPrefix = "socket:[";
  char target[64];
  while (const dirent* entry = ::readdir(fds.get())) {
    if (entry->d_name[0] == '.') continue;
    const ssize_t length = ::readlinkat(::dirfd(fds.get()), entry->d_name, target, sizeof target);
    if (length <= 0 || static_cast<std::size_t>(length) >= sizeof target) continue;
    const std::string_view link(target, static_cast<std::size_t>(length));
    if (!link.starts_with(kPrefix) || !link.ends_with(']')) continue;
    std::uint64_t inode = 0;
    if (std::from_chars(link.data() + kPrefix.size(), link.data() + link.size() - 1, inode).ec ==
            std::errc() &&
        f(inode))
      return true;
  }
  return false;
}

Holds holds_one_of(const std::string& proc, pid_t pid, const SocketInodes& sockets) {
  int error = 0;
  const Directory fds = open_directory(proc + "/" + std::to_string(pid) + "/fd", error);
  if (!fds) return error == ENOENT && gone(pid) ? Holds::no : Holds::unreadable;
  return any_socket(fds,
                    [&](std::uint64_t inode) {
                      return std::find(sockets.begin(), sockets.end(), inode) != sockets.end();
                    })
             ? Holds::yes
             : Holds::no;
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

std::unordered_map<std::uint64_t, KernelLikeProcess> sockets_of_kernel_like_processes(
    const std::string& proc) {
  std::unordered_map<std::uint64_t, KernelLikeProcess> by_inode;
  int error = 0;
  for (const pid_t pid : platform::linux_proc::list_pids(proc)) {
    const std::string base = proc + "/" + std::to_string(pid);
    // The fds first: those of another user's process cannot be read, and its command line is
    // then not worth reading (a read that can wait on that process's memory lock).
    const Directory fds = open_directory(base + "/fd", error);
    if (!fds) continue;
    std::ifstream in(base + "/cmdline", std::ios::binary);
    const std::string cmdline{std::istreambuf_iterator<char>(in), {}};
    const auto named = find_connection_file(util::split_nul(cmdline));
    if (!named) continue;
    const KernelLikeProcess holder{(named->starts_with('/') ? base + "/root" : base + "/cwd/") +
                                   *named};
    any_socket(fds, [&](std::uint64_t inode) {
      by_inode.emplace(inode, holder);
      return false;
    });
  }
  return by_inode;
}

std::optional<bool> is_another_kernel(const KernelLikeProcess& holder, const ConnectionInfo& ours) {
  ConnectionInfo theirs;
  try {
    theirs = load_connection_file(holder.connection_file);
  } catch (const std::exception&) {
    return std::nullopt;  // gone, unreadable, or not a connection file after all
  }
  const std::string_view a = theirs.key.reveal();
  const std::string_view b = ours.key.reveal();
  if (!a.empty() || !b.empty())
    return a.size() != b.size() || CRYPTO_memcmp(a.data(), b.data(), a.size()) != 0;
  return theirs.shell_port != ours.shell_port || theirs.iopub_port != ours.iopub_port ||
         theirs.stdin_port != ours.stdin_port || theirs.control_port != ours.control_port ||
         theirs.hb_port != ours.hb_port;
}

}  // namespace kwd::protocol::linux_net
