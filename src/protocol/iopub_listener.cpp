#include "kwd/protocol/iopub_listener.hpp"

#include <spdlog/spdlog.h>

#include "kwd/protocol/kernel_socket.hpp"

namespace kwd::protocol {
namespace {

constexpr int kMonitoredEvents =
    ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
    ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
    ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;

}  // namespace

IopubListener::IopubListener(zmq::context_t& context, const ConnectionInfo& info,
                             MessageDecoder decoder, Handler on_message)
    : endpoint_(info.endpoint(info.iopub_port)),
      curve_(info.curve.has_value()),
      decoder_(std::move(decoder)),
      on_message_(std::move(on_message)),
      socket_(make_kernel_socket(context, zmq::socket_type::sub, info, decoder_.limits())),
      receiver_(decoder_.limits().max_frames) {
  socket_.set(zmq::sockopt::subscribe, "");
  monitor_.emplace(context, socket_, kMonitoredEvents);
  socket_.connect(endpoint_);
}

bool IopubListener::receive_one() {
  const auto got = receiver_.receive(socket_);
  if (got == MultipartReceiver::Result::nothing_waiting) return false;
  if (got == MultipartReceiver::Result::too_many_frames) {
    dropped_.add(DropReason::too_many_frames);
    receiver_.release_large();
    return true;
  }
  const DropReason why = decoder_.decode(receiver_.frames(), message_);
  if (why != DropReason::none) {
    dropped_.add(why);
    spdlog::debug("iopub: dropped a message ({})", drop_reason_name(why));
  } else {
    ++seen_;
    if (on_message_) on_message_(message_);
  }
  receiver_.release_large();
  constexpr std::size_t kLarge = 256 * 1024;
  if (message_.content_bytes > kLarge) message_.content = nullptr;
  return true;
}

std::size_t IopubListener::receive(std::size_t budget) {
  std::size_t handled = 0;
  try {
    while (handled < budget && receive_one())
      ++handled;
  } catch (const zmq::error_t& e) {
    spdlog::debug("iopub: receive failed: {}", e.what());
  }
  return handled;
}

void IopubListener::reconnect() {
  try {
    socket_.disconnect(endpoint_);
  } catch (const zmq::error_t&) {
    // libzmq may have dropped the endpoint already; connecting again is what matters.
  }
  socket_.connect(endpoint_);
  ++reconnects_;
}

void IopubListener::on_monitor_events() {
  for (const SocketEvent& e : monitor_->drain()) {
    switch (e.event) {
      case ZMQ_EVENT_CONNECTED:
        ++connects_;
        break;
      case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        connected_ = true;
        if (lost_connection_) {
          // The kernel was there to reconnect to, so the stream was cut for cause: libzmq
          // resets a connection that carries a frame over ZMQ_MAXMSGSIZE or breaks framing.
          // Whatever was in flight on it is lost; that counts as a drop.
          dropped_.add(DropReason::connection_reset);
          spdlog::info("iopub: reconnected to the kernel after the connection was reset");
          lost_connection_ = false;
        }
        break;
      case ZMQ_EVENT_DISCONNECTED:
        if (connected_) {
          ++disconnects_;
          lost_connection_ = true;
        }
        connected_ = false;
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
      case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        if (++handshake_failures_ == 1) {
          if (curve_)
            spdlog::warn(
                "iopub: the CurveZMQ handshake with the kernel at {} failed; no IOPub message "
                "can be read (is curve_publickey in the connection file the kernel's?)",
                endpoint_);
          else
            spdlog::warn(
                "iopub: the ZMTP handshake with the kernel at {} failed; no IOPub message can "
                "be read (does the kernel require CurveZMQ?)",
                endpoint_);
        }
        break;
      default:
        break;
    }
  }
}

}  // namespace kwd::protocol
