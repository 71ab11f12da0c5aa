#include "kwd/protocol/port_readiness.hpp"

#include <sys/socket.h>
#include <sys/stat.h>

#include <string>

#include "kwd/protocol/linux/listening_sockets.hpp"
#include "kwd/protocol/linux/socket_owner.hpp"

namespace kwd::protocol {
namespace {

void append(linux_net::SocketInodes& to, const std::optional<linux_net::SocketInodes>& found) {
  if (found) to.insert(to.end(), found->begin(), found->end());
}

// A listener on the kernel's port is the kernel's only if its tree holds the socket: another
// process may have bound the port first (the kernel's own bind then fails), and frames sent
// there would reach a stranger, another kernel's shell socket even.
PortState whose(pid_t kernel_pid, const linux_net::SocketInodes& listeners) {
  if (listeners.empty()) return PortState::not_yet;
  const auto ours = linux_net::process_tree_holds(kernel_pid, listeners);
  if (!ours) return PortState::cannot_tell;
  return *ours ? PortState::listening : PortState::held_by_another;
}

}  // namespace

PortState port_state(pid_t kernel_pid, const ConnectionInfo& info, int port,
                     std::chrono::milliseconds max_age) {
  if (port <= 0) return PortState::not_yet;
  if (info.transport == Transport::ipc) {
    struct stat st {};
    const std::string path = info.ip + "-" + std::to_string(port);
    return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) ? PortState::listening
                                                                  : PortState::not_yet;
  }
  // The kernel is in our network namespace: sock_diag answers for it. A host without IPv6
  // cannot answer for it, and has nothing listening there either.
  if (const auto v4 = linux_net::listening_by_sock_diag(AF_INET, port, max_age)) {
    linux_net::SocketInodes listeners = *v4;
    append(listeners, linux_net::listening_by_sock_diag(AF_INET6, port, max_age));
    return whose(kernel_pid, listeners);
  }

  // No sock_diag here: the kernel's own view in procfs, slower.
  const std::string base = "/proc/" + std::to_string(kernel_pid) + "/net/";
  const auto tcp = linux_net::listening_in_proc_net(base + "tcp", port);
  const auto tcp6 = linux_net::listening_in_proc_net(base + "tcp6", port);
  if (!tcp && !tcp6) return PortState::cannot_tell;
  linux_net::SocketInodes listeners;
  append(listeners, tcp);
  append(listeners, tcp6);
  return whose(kernel_pid, listeners);
}

}  // namespace kwd::protocol
