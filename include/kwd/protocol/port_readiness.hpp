#pragma once

#include <sys/types.h>

#include <chrono>
#include <string_view>

#include "kwd/protocol/connection_file.hpp"

namespace kwd::protocol {

// held_by_another: another kernel listens on the port (not the one named by this connection
// file, nor a process below the one started).
enum class PortState { listening, not_yet, held_by_another, cannot_tell };

// Whether the kernel has bound `port` yet. We connect only once it has: a TCP connect to a
// local port nobody listens on can, when the kernel's port lies in the ephemeral range (as
// jupyter_client's random ports do), land on itself — a "simultaneous open" that then holds
// the port and makes the kernel's own bind fail. And a port another kernel holds would have
// us subscribe and ping that kernel's shell socket. `connection_file` is the one the kernel
// was started with. Implemented per platform. An answer up to `max_age` old may be given: it
// may come from a listing taken for another kernel.
PortState port_state(pid_t kernel_pid, const ConnectionInfo& info, std::string_view connection_file,
                     int port, std::chrono::milliseconds max_age = {});

// An ipc "port" is a socket file (IP-PORT), on every platform: listening once it is there.
PortState ipc_port_state(const ConnectionInfo& info, int port);

// Whether to connect now: the kernel listens there, or nothing better can be known.
inline bool may_connect(PortState state) {
  return state == PortState::listening || state == PortState::cannot_tell;
}

}  // namespace kwd::protocol
