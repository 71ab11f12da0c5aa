#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "kwd/protocol/connection_file.hpp"
#include "kwd/protocol/linux/listening_sockets.hpp"

namespace kwd::protocol::linux_net {

// Whether `root`, or a process below it, has one of `sockets` open: is the listener found on a
// kernel's port the kernel's own? nullopt when that cannot be read (fds of another user, a
// process hidden by /proc's hidepid, a kernel without /proc/PID/task/TID/children).
std::optional<bool> process_tree_holds(pid_t root, const SocketInodes& sockets,
                                       const std::string& proc = "/proc");

// A process that names a connection file in its argv (protocol::find_connection_file), and
// where that file lies as the process sees it: /proc/PID/root/PATH, or /proc/PID/cwd/PATH
// for a relative one.
struct KernelLikeProcess {
  std::string connection_file;
};

// The sockets held by every process that names a connection file, by inode. One pass over
// the process table: the command lines, then the fds of those few.
std::unordered_map<std::uint64_t, KernelLikeProcess> sockets_of_kernel_like_processes(
    const std::string& proc = "/proc");

// Whether `holder` is another kernel than the one `ours` describes: the file it names loads
// and holds another key (or, unsigned, other ports). nullopt when that file cannot be read.
// A kernel in a container naming its file by another path, or one detached with setsid, is
// the same kernel: same key.
std::optional<bool> is_another_kernel(const KernelLikeProcess& holder, const ConnectionInfo& ours);

}  // namespace kwd::protocol::linux_net
