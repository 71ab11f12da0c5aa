#include "kwd/protocol/port_readiness.hpp"

namespace kwd::protocol {

// No procfs: TCP listeners cannot be listed cheaply without privileges, so the caller
// connects and relies on libzmq's reconnect. ipc sockets are files and can be seen.
PortState port_state(pid_t /*kernel_pid*/, const ConnectionInfo& info,
                     std::string_view /*connection_file*/, int port,
                     std::chrono::milliseconds /*max_age*/) {
  if (port <= 0) return PortState::not_yet;
  if (info.transport == Transport::ipc) return ipc_port_state(info, port);
  return PortState::cannot_tell;
}

}  // namespace kwd::protocol
