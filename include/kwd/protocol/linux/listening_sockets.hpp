#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace kwd::protocol::linux_net {

// Whether a TCP socket of `family` (AF_INET or AF_INET6) is listening on `port`; nullopt if
// this way cannot tell.
//
// sock_diag asks the kernel for sockets in LISTEN state only, and it walks just its
// listening hash for that. /proc/PID/net/tcp{,6} walks every bucket of the established
// hash too, whatever is in it: about 2 ms a read on this project's CI machines, read every
// 50 ms while a kernel starts, against a few microseconds here. It is the fallback where
// sock_diag is missing (no inet_diag module).
// The sock_diag answer is a snapshot of every listening port, taken again once it is older
// than `max_age` (0: always): one dump serves every kernel checked within that time.
std::optional<bool> listening_by_sock_diag(int family, int port,
                                           std::chrono::milliseconds max_age = {});
std::optional<bool> listening_in_proc_net(const std::string& path, int port);

}  // namespace kwd::protocol::linux_net
