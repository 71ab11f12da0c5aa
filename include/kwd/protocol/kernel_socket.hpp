#pragma once

#include <zmq.hpp>

#include "kwd/protocol/connection_file.hpp"
#include "kwd/protocol/wire.hpp"

namespace kwd::protocol {

// A socket to one of the kernel's ports, set up the way every watchdog socket is: no
// linger (we never need to flush anything at exit), libzmq's frame cap, IPv6 when the
// address is one, and CurveZMQ as a client when the connection file carries keys.
// Throws zmq::error_t if libzmq refuses an option (e.g. built without CURVE).
zmq::socket_t make_kernel_socket(zmq::context_t& context, zmq::socket_type type,
                                 const ConnectionInfo& info, const WireLimits& limits);

}  // namespace kwd::protocol
