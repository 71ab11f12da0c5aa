#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kwd::protocol::linux_net {

using SocketInodes = std::vector<std::uint64_t>;

// Which network namespace to ask in: ours (the default), or a process's (a pod's kernel, seen
// by the node's daemon), entered to make the netlink socket (CAP_SYS_ADMIN).
struct NetNamespace {
  std::uint64_t inode = 0;  // names it among the snapshots
  pid_t enter_pid = 0;      // 0: ours, not entered
};

// The inodes of the TCP sockets of `family` (AF_INET or AF_INET6) listening on `port` (empty
// when none is); nullopt if this way cannot tell. The inode names the socket among a
// process's open files (/proc/PID/fd/N -> "socket:[INODE]"), which says whose it is.
//
// sock_diag asks the kernel for sockets in LISTEN state only, and it walks just its
// listening hash for that. /proc/PID/net/tcp{,6} walks every bucket of the established
// hash too, whatever is in it: about 2 ms a read on this project's CI machines, read every
// 50 ms while a kernel starts, against a few microseconds here. It is the fallback where
// sock_diag is missing (no inet_diag module).
// The sock_diag answer is a snapshot of every listening port, taken again once it is older
// than `max_age` (0: always): one dump serves every kernel checked within that time.
std::optional<SocketInodes> listening_by_sock_diag(int family, int port,
                                                   std::chrono::milliseconds max_age = {},
                                                   const NetNamespace& where = {});
std::optional<SocketInodes> listening_in_proc_net(const std::string& path, int port);

}  // namespace kwd::protocol::linux_net
