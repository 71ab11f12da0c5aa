#include "kwd/protocol/port_readiness.hpp"

#include <sys/socket.h>
#include <sys/stat.h>

#include <string>

#include "kwd/protocol/linux/listening_sockets.hpp"

namespace kwd::protocol {

PortState port_state(pid_t kernel_pid, const ConnectionInfo& info, int port,
                     std::chrono::milliseconds max_age) {
  if (port <= 0) return PortState::not_yet;
  if (info.transport == Transport::ipc) {
    struct stat st {};
    const std::string path = info.ip + "-" + std::to_string(port);
    return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) ? PortState::listening
                                                                  : PortState::not_yet;
  }
  // The kernel is our child, in our network namespace: sock_diag answers for it.
  if (const auto v4 = linux_net::listening_by_sock_diag(AF_INET, port, max_age)) {
    if (*v4) return PortState::listening;
    // A host without IPv6 cannot answer for it, and has nothing listening there either.
    const auto v6 = linux_net::listening_by_sock_diag(AF_INET6, port, max_age);
    return v6 && *v6 ? PortState::listening : PortState::not_yet;
  }

  // No sock_diag here: the kernel's own view in procfs, slower.
  const std::string base = "/proc/" + std::to_string(kernel_pid) + "/net/";
  const auto tcp = linux_net::listening_in_proc_net(base + "tcp", port);
  if (tcp && *tcp) return PortState::listening;
  const auto tcp6 = linux_net::listening_in_proc_net(base + "tcp6", port);
  if (tcp6 && *tcp6) return PortState::listening;
  return tcp || tcp6 ? PortState::not_yet : PortState::cannot_tell;
}

}  // namespace kwd::protocol
