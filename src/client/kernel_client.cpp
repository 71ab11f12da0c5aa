#include "kwd/client/kernel_client.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>

#include "kwd/protocol/dead_stream_drain.hpp"
#include "kwd/protocol/kernel_socket.hpp"
#include "kwd/protocol/multipart_receiver.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/private_files.hpp"

namespace kwd::client {
namespace {

constexpr std::string_view kDelimiter = "<IDS|MSG>";
constexpr std::string_view kProtocolVersion = "5.3";
// Waiting messages handled per wake-up of one socket, so that a flood of output on IOPub
// does not starve the shell reply or a timer.
constexpr int kBudget = 64;

int port_of(const protocol::ConnectionInfo& info, Channel channel) {
  switch (channel) {
    case Channel::shell:
      return info.shell_port;
    case Channel::control:
      return info.control_port;
    case Channel::stdin_channel:
      return info.stdin_port;
    case Channel::iopub:
      return info.iopub_port;
  }
  return 0;
}

}  // namespace

std::string_view channel_name(Channel channel) {
  switch (channel) {
    case Channel::shell:
      return "shell";
    case Channel::control:
      return "control";
    case Channel::stdin_channel:
      return "stdin";
    case Channel::iopub:
      return "iopub";
  }
  return "?";
}

KernelClient::KernelClient(zmq::context_t& context, loop::EventLoop& loop,
                           const protocol::ConnectionInfo& info, const protocol::WireLimits& limits,
                           Handler on_message)
    : loop_(loop),
      signer_(info.signature_scheme, info.key),
      session_(util::random_name(32)),
      on_message_(std::move(on_message)),
      receiver_(limits.max_frames) {
  const std::array channels{Channel::shell, Channel::control, Channel::stdin_channel,
                            Channel::iopub};
  for (std::size_t i = 0; i < channels.size(); ++i) {
    const Channel channel = channels[i];
    const auto type = channel == Channel::iopub ? zmq::socket_type::sub : zmq::socket_type::dealer;
    auto s = std::make_unique<Socket>(
        Socket{channel, protocol::make_kernel_socket(context, type, info, limits),
               std::make_unique<protocol::MessageDecoder>(
                   protocol::MessageSigner(info.signature_scheme, info.key), limits)});
    if (channel == Channel::iopub) {
      s->socket.set(zmq::sockopt::subscribe, "");
      iopub_monitor_.emplace(context, s->socket,
                             ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED);
    }
    // The kernel's ROUTER answers the identity it saw; the session id names us, as in
    // jupyter_client.
    if (channel != Channel::iopub) s->socket.set(zmq::sockopt::routing_id, session_);
    s->socket.connect(info.endpoint(port_of(info, channel)));
    Socket* raw = s.get();
    loop_.watch_socket(raw->socket.handle(), [this, raw] { on_readable(*raw); });
    sockets_[i] = std::move(s);
  }
}

KernelClient::~KernelClient() {
  for (auto& s : sockets_)
    if (s) loop_.unwatch_socket(s->socket.handle());
}

std::string KernelClient::send(Channel channel, std::string_view msg_type,
                               const nlohmann::json& content) {
  Socket& s = *sockets_[static_cast<std::size_t>(channel)];
  const std::string msg_id = util::random_name(32);
  const nlohmann::json header = {{"msg_id", msg_id},
                                 {"msg_type", msg_type},
                                 {"session", session_},
                                 {"username", "kernel-watchdog"},
                                 {"date", util::iso8601_utc(util::wall_ms())},
                                 {"version", kProtocolVersion}};
  const std::array<std::string, 4> parts{header.dump(), "{}", "{}", content.dump()};
  const std::array<std::string_view, 4> views{parts[0], parts[1], parts[2], parts[3]};
  const std::string signature = signer_.sign(views);
  s.socket.send(zmq::buffer(kDelimiter), zmq::send_flags::sndmore);
  s.socket.send(zmq::buffer(signature), zmq::send_flags::sndmore);
  for (std::size_t i = 0; i < parts.size(); ++i)
    s.socket.send(zmq::buffer(parts[i]),
                  i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  loop_.socket_used(s.socket.handle());
  return msg_id;
}

void KernelClient::on_readable(Socket& s) {
  try {
    for (int handled = 0; handled < kBudget; ++handled) {
      const auto got = receiver_.receive(s.socket);
      if (got == protocol::MultipartReceiver::Result::nothing_waiting) return;
      if (got == protocol::MultipartReceiver::Result::too_many_frames) {
        drops_.add(protocol::DropReason::too_many_frames);
        continue;
      }
      const auto why = s.decoder->decode(receiver_.frames(), message_);
      if (why != protocol::DropReason::none) {
        drops_.add(why);
        spdlog::debug("{}: dropped a message ({})", channel_name(s.channel),
                      protocol::drop_reason_name(why));
        continue;
      }
      on_message_(s.channel, message_);
      receiver_.release_large();
    }
  } catch (const zmq::error_t& e) {
    spdlog::debug("{}: receive failed: {}", channel_name(s.channel), e.what());
  }
}

void KernelClient::drain_iopub(std::chrono::milliseconds quiet, std::chrono::milliseconds budget) {
  Socket& s = *sockets_[static_cast<std::size_t>(Channel::iopub)];
  protocol::drain_dead_stream({s.socket.handle(), iopub_monitor_->handle(),
                               [this] {
                                 for (const auto& e : iopub_monitor_->drain())
                                   iopub_connected_ = e.event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
                                 return iopub_connected_;
                               },
                               [this, &s] {
                                 // on_readable takes a bounded batch; again until none is left.
                                 zmq_pollitem_t item{s.socket.handle(), 0, ZMQ_POLLIN, 0};
                                 while (zmq_poll(&item, 1, 0) > 0)
                                   on_readable(s);
                               }},
                              quiet, budget);
}

}  // namespace kwd::client
