#include "kwd/protocol/socket_monitor.hpp"

#include <atomic>
#include <cstring>

#include "kwd/protocol/kernel_socket.hpp"

namespace kwd::protocol {
namespace {

std::string next_monitor_endpoint() {
  static std::atomic<unsigned> counter{0};
  return "inproc://kwd-monitor-" + std::to_string(counter.fetch_add(1));
}

}  // namespace

SocketMonitor::SocketMonitor(zmq::context_t& context, zmq::socket_t& watched, int events)
    : watched_(watched.handle()), pair_(context, zmq::socket_type::pair) {
  const std::string endpoint = next_monitor_endpoint();
  if (zmq_socket_monitor(watched_, endpoint.c_str(), events) != 0) throw zmq::error_t();
  pair_.set(zmq::sockopt::linger, 0);
  pair_.connect(endpoint);
}

SocketMonitor::~SocketMonitor() {
  zmq_socket_monitor(watched_, nullptr, 0);
}

bool SocketMonitor::receive(zmq::message_t& into) {
  // A failure ends this drain; what is left is read on the next one.
  try {
    return recv_through_signals(pair_, into, zmq::recv_flags::dontwait).has_value();
  } catch (const zmq::error_t&) {
    return false;
  }
}

std::vector<SocketEvent> SocketMonitor::drain() {
  std::vector<SocketEvent> events;
  for (;;) {
    // Each event is two frames: 6 bytes (event, value) and the endpoint.
    zmq::message_t head;
    if (!receive(head)) break;
    SocketEvent e;
    if (head.size() >= 6) {
      std::memcpy(&e.event, head.data(), 2);
      std::memcpy(&e.value, static_cast<const char*>(head.data()) + 2, 4);
      events.push_back(e);
    }
    while (head.more()) {
      zmq::message_t rest;
      if (!receive(rest)) break;
      head = std::move(rest);
    }
  }
  return events;
}

}  // namespace kwd::protocol
