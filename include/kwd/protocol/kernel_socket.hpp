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

// socket.recv(), again when a signal interrupted it. Even a non-blocking receive polls
// libzmq's mailbox now and then, and SIGCHLD (the kernel dying) lands exactly while we read
// its last messages; an interrupted frame of a multipart message would otherwise split it.
// Other errors throw zmq::error_t as recv() does.
zmq::recv_result_t recv_through_signals(zmq::socket_t& socket, zmq::message_t& into,
                                        zmq::recv_flags flags);

}  // namespace kwd::protocol
