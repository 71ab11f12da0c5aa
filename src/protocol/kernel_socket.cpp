#include "kwd/protocol/kernel_socket.hpp"

#include <array>
#include <cerrno>

namespace kwd::protocol {
namespace {

void set_bytes(zmq::socket_t& socket, int option, std::string_view value) {
  if (zmq_setsockopt(socket.handle(), option, value.data(), value.size()) != 0)
    throw zmq::error_t();
}

void set_int(zmq::socket_t& socket, int option, int value) {
  if (zmq_setsockopt(socket.handle(), option, &value, sizeof value) != 0) throw zmq::error_t();
}

void make_curve_client(zmq::socket_t& socket, const CurveKeys& keys) {
  set_bytes(socket, ZMQ_CURVE_SERVERKEY, keys.server_public);
  if (!keys.secret.empty()) {
    // The file's own pair: accepted by a kernel that allows only that key (ZAP) as well as
    // by one that allows any client.
    set_bytes(socket, ZMQ_CURVE_PUBLICKEY, keys.server_public);
    set_bytes(socket, ZMQ_CURVE_SECRETKEY, keys.secret.reveal());
    return;
  }
  std::array<char, 41> client_public{};
  std::array<char, 41> client_secret{};
  if (zmq_curve_keypair(client_public.data(), client_secret.data()) != 0) throw zmq::error_t();
  set_bytes(socket, ZMQ_CURVE_PUBLICKEY, std::string_view(client_public.data(), 40));
  set_bytes(socket, ZMQ_CURVE_SECRETKEY, std::string_view(client_secret.data(), 40));
  client_secret.fill('\0');
}

}  // namespace

zmq::socket_t make_kernel_socket(zmq::context_t& context, zmq::socket_type type,
                                 const ConnectionInfo& info, const WireLimits& limits) {
  zmq::socket_t socket(context, type);
  set_int(socket, ZMQ_LINGER, 0);
  const std::int64_t max_frame = static_cast<std::int64_t>(limits.max_frame_bytes);
  if (zmq_setsockopt(socket.handle(), ZMQ_MAXMSGSIZE, &max_frame, sizeof max_frame) != 0)
    throw zmq::error_t();
  // A kernel that went away comes back (if it does) within ~100 ms of binding again.
  set_int(socket, ZMQ_RECONNECT_IVL, 100);
  set_int(socket, ZMQ_RECONNECT_IVL_MAX, 1000);
  if (info.ipv6()) set_int(socket, ZMQ_IPV6, 1);
  if (info.curve) make_curve_client(socket, *info.curve);
  return socket;
}

zmq::recv_result_t recv_through_signals(zmq::socket_t& socket, zmq::message_t& into,
                                        zmq::recv_flags flags) {
  for (;;) {
    try {
      return socket.recv(into, flags);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
}

}  // namespace kwd::protocol
