#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "kwd/protocol/linux/listening_sockets.hpp"

namespace kwd::protocol::linux_net {

// Whether `root`, or a process below it, has one of `sockets` open: is the listener found on a
// kernel's port the kernel's own? nullopt when that cannot be read (fds of another user, a
// process hidden by /proc's hidepid, a kernel without /proc/PID/task/TID/children).
std::optional<bool> process_tree_holds(pid_t root, const SocketInodes& sockets,
                                       const std::string& proc = "/proc");

// Whether one of `sockets` is held by another Jupyter kernel: a process whose command line
// names a connection file (an argument ending in .json) but not `connection_file`. A kernel
// whose port another took first fails to bind it; what listens there is then, most often, a
// kernel started a moment before with the same port. Anything else holding it (docker-proxy
// for a kernel in a container, ssh for a tunnelled one, a kernel detached with setsid, which
// names this very file) is not known to be wrong: false.
bool held_by_another_kernel(const SocketInodes& sockets, std::string_view connection_file,
                            const std::string& proc = "/proc");

}  // namespace kwd::protocol::linux_net
