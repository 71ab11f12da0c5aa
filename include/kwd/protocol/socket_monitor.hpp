#pragma once

#include <cstdint>
#include <string>
#include <vector>
#include <zmq.hpp>

namespace kwd::protocol {

struct SocketEvent {
  std::uint16_t event = 0;  // ZMQ_EVENT_*
  std::uint32_t value = 0;  // fd, errno or protocol error code, depending on the event
};

// What libzmq says about one socket's connections (connected, handshake failed,
// disconnected), read from an inproc PAIR socket the event loop can watch. Must be
// destroyed before the socket it watches.
class SocketMonitor {
 public:
  SocketMonitor(zmq::context_t& context, zmq::socket_t& watched, int events);
  ~SocketMonitor();
  SocketMonitor(const SocketMonitor&) = delete;
  SocketMonitor& operator=(const SocketMonitor&) = delete;

  [[nodiscard]] void* handle() noexcept { return pair_.handle(); }
  // The events waiting, oldest first, without blocking.
  std::vector<SocketEvent> drain();

 private:
  bool receive(zmq::message_t& into);
  void* watched_;
  zmq::socket_t pair_;
};

}  // namespace kwd::protocol
