#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "kwd/protocol/connection_file.hpp"
#include "kwd/protocol/multipart_receiver.hpp"
#include "kwd/protocol/socket_monitor.hpp"
#include "kwd/protocol/wire.hpp"

namespace kwd::protocol {

// The watchdog's seat on the kernel's IOPub: a SUB socket subscribed to everything. Every
// message goes through the decoder (signature first); what is believed goes to the
// handler, the rest is counted by reason. The socket monitor says when the connection was
// made, lost, or refused at the handshake.
class IopubListener {
 public:
  using Handler = std::function<void(const Message&)>;

  IopubListener(zmq::context_t& context, const ConnectionInfo& info, MessageDecoder decoder,
                Handler on_message);
  IopubListener(const IopubListener&) = delete;
  IopubListener& operator=(const IopubListener&) = delete;

  [[nodiscard]] void* socket_handle() noexcept { return socket_.handle(); }
  [[nodiscard]] void* monitor_handle() noexcept { return monitor_->handle(); }

  // Receives and handles up to `budget` waiting messages; returns how many there were.
  std::size_t receive(std::size_t budget);
  // Reads the monitor's events: connects, disconnects, handshake failures.
  void on_monitor_events();
  // The connection was lost and not made again. libzmq reconnects by itself after a network
  // error, but not after a protocol error (a frame over ZMQ_MAXMSGSIZE, broken framing):
  // that session is closed for good, and only reconnect() brings IOPub back.
  [[nodiscard]] bool connection_lost() const noexcept { return lost_connection_; }
  void reconnect();

  [[nodiscard]] std::uint64_t messages_seen() const noexcept { return seen_; }
  [[nodiscard]] const DropCounts& dropped() const noexcept { return dropped_; }
  [[nodiscard]] bool connected() const noexcept { return connected_; }
  [[nodiscard]] std::uint64_t connects() const noexcept { return connects_; }
  [[nodiscard]] std::uint64_t disconnects() const noexcept { return disconnects_; }
  [[nodiscard]] std::uint64_t handshake_failures() const noexcept { return handshake_failures_; }
  [[nodiscard]] std::uint64_t reconnects() const noexcept { return reconnects_; }

 private:
  bool receive_one();

  std::string endpoint_;
  bool curve_;
  MessageDecoder decoder_;
  Handler on_message_;
  zmq::socket_t socket_;
  std::optional<SocketMonitor> monitor_;  // after socket_: destroyed first

  MultipartReceiver receiver_;
  Message message_;

  std::uint64_t seen_ = 0;
  DropCounts dropped_;
  bool connected_ = false;
  bool lost_connection_ = false;  // a disconnect not yet followed by a reconnect
  std::uint64_t connects_ = 0;
  std::uint64_t disconnects_ = 0;
  std::uint64_t handshake_failures_ = 0;
  std::uint64_t reconnects_ = 0;
};

}  // namespace kwd::protocol
