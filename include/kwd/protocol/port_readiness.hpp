#pragma once

#include <sys/types.h>

#include <chrono>

#include "kwd/protocol/connection_file.hpp"

namespace kwd::protocol {

enum class PortState { listening, not_yet, cannot_tell };

// Whether the kernel has bound `port` yet. We connect only once it has: a TCP connect to a
// local port nobody listens on can, when the kernel's port lies in the ephemeral range (as
// jupyter_client's random ports do), land on itself — a "simultaneous open" that then holds
// the port and makes the kernel's own bind fail. Implemented per platform. An answer up to
// `max_age` old may be given: it may come from a listing taken for another kernel.
PortState port_state(pid_t kernel_pid, const ConnectionInfo& info, int port,
                     std::chrono::milliseconds max_age = {});

}  // namespace kwd::protocol
