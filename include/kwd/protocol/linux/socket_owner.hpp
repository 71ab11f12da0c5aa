#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "kwd/protocol/linux/listening_sockets.hpp"

namespace kwd::protocol::linux_net {

// Whether `root`, or a process below it, has one of `sockets` open: is the listener found on a
// kernel's port the kernel's own, or another process's that took the port first? nullopt when
// that cannot be read (fds of another user, a kernel without /proc/PID/task/TID/children).
std::optional<bool> process_tree_holds(pid_t root, const SocketInodes& sockets,
                                       const std::string& proc = "/proc");

}  // namespace kwd::protocol::linux_net
