#include "kwd/protocol/socket_monitor.hpp"

#include <atomic>
#include <cstring>

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

std::vector<SocketEvent> SocketMonitor::drain() {
  std::vector<SocketEvent> events;
  for (;;) {
    // Each event is two frames: 6 bytes (event, value) and the endpoint.
    zmq::message_t head;
    if (!pair_.recv(head, zmq::recv_flags::dontwait)) break;
    SocketEvent e;
    if (head.size() >= 6) {
      std::memcpy(&e.event, head.data(), 2);
      std::memcpy(&e.value, static_cast<const char*>(head.data()) + 2, 4);
      events.push_back(e);
    }
    while (head.more()) {
      zmq::message_t rest;
      if (!pair_.recv(rest, zmq::recv_flags::dontwait)) break;
      head = std::move(rest);
    }
  }
  return events;
}

}  // namespace kwd::protocol
