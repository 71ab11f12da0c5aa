#pragma once

#include <sys/types.h>

#include "kwd/protocol/connection_file.hpp"

namespace kwd::protocol {

enum class PortState { listening, not_yet, cannot_tell };

// Whether the kernel has bound `port` yet. We connect only once it has: a TCP connect to a
// local port nobody listens on can, when the kernel's port lies in the ephemeral range (as
// jupyter_client's random ports do), land on itself — a "simultaneous open" that then holds
// the port and makes the kernel's own bind fail. Implemented per platform.
PortState port_state(pid_t kernel_pid, const ConnectionInfo& info, int port);

}  // namespace kwd::protocol
