#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <zmq.hpp>

#include "kwd/loop/event_loop.hpp"
#include "kwd/protocol/connection_file.hpp"
#include "kwd/protocol/multipart_receiver.hpp"
#include "kwd/protocol/socket_monitor.hpp"
#include "kwd/protocol/wire.hpp"

namespace kwd::client {

enum class Channel { shell, control, stdin_channel, iopub };
std::string_view channel_name(Channel channel);

// A Jupyter client of one kernel, on the caller's event loop: DEALER sockets for shell,
// control and stdin, a SUB socket for IOPub (everything), messages signed with the
// connection file's key and only signed ones believed (protocol::MessageDecoder).
class KernelClient {
 public:
  // The handler may take what it keeps out of the message (its content is made anew for the
  // next one): a stream's text or a display's data may be megabytes.
  using Handler = std::function<void(Channel, protocol::Message&)>;

  // Throws zmq::error_t when a socket cannot be made or connected, and
  // protocol::SignatureSchemeError for a scheme OpenSSL does not have.
  KernelClient(zmq::context_t& context, loop::EventLoop& loop, const protocol::ConnectionInfo& info,
               const protocol::WireLimits& limits, Handler on_message);
  ~KernelClient();
  KernelClient(const KernelClient&) = delete;
  KernelClient& operator=(const KernelClient&) = delete;

  // Sends a request; returns its msg_id (what the replies and outputs name as their parent).
  std::string send(Channel channel, std::string_view msg_type, const nlohmann::json& content);
  // Handles what is waiting on IOPub now, then what comes until it has been quiet for
  // `quiet` or `budget` has passed: a dead kernel's last messages (see Watch's drain).
  void drain_iopub(std::chrono::milliseconds quiet, std::chrono::milliseconds budget);
  // Messages that were not believed, by reason.
  [[nodiscard]] const protocol::DropCounts& drops() const { return drops_; }

 private:
  struct Socket {
    Channel channel;
    zmq::socket_t socket;
    std::unique_ptr<protocol::MessageDecoder> decoder;
  };
  void on_readable(Socket& s);

  loop::EventLoop& loop_;
  protocol::MessageSigner signer_;
  std::string session_;
  Handler on_message_;
  protocol::DropCounts drops_;
  protocol::MultipartReceiver receiver_;
  protocol::Message message_;  // reused
  std::array<std::unique_ptr<Socket>, 4> sockets_;
  // IOPub's connection as libzmq tells it: a dead kernel's stream is drained without waiting
  // once it has closed. After sockets_: destroyed before the socket it watches.
  std::optional<protocol::SocketMonitor> iopub_monitor_;
  bool iopub_connected_ = false;
};

}  // namespace kwd::client
