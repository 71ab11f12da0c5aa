#pragma once

#include <chrono>
#include <functional>

namespace kwd::protocol {

// How a subscriber's socket is read after the kernel's death, for drain_dead_stream.
struct DeadStream {
  void* socket = nullptr;   // the SUB socket the kernel published on
  void* monitor = nullptr;  // its SocketMonitor's handle: events wake the wait too
  // Reads the monitor's waiting events and says whether the connection still stands.
  std::function<bool()> connected;
  // Takes what is waiting on the socket, without blocking.
  std::function<void()> read_waiting;
};

// What a dead kernel published last, read before its report is written. Once libzmq has said
// the connection closed, what came before the close is queued already: that, and one look of
// a millisecond for a message decoded in the same pass as a broken frame. While the
// connection still stands, until `quiet` passes with nothing new (or `budget` in all).
void drain_dead_stream(const DeadStream& stream, std::chrono::milliseconds quiet,
                       std::chrono::milliseconds budget);

}  // namespace kwd::protocol
