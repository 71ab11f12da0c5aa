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
      socket_(make_kernel_socket(context, zmq::socket_type::sub, info, decoder_.limits())) {
  socket_.set(zmq::sockopt::subscribe, "");
  monitor_.emplace(context, socket_, kMonitoredEvents);
  socket_.connect(endpoint_);
  frames_.reserve(16);
  views_.reserve(16);
}

bool IopubListener::receive_one() {
  const std::size_t max_frames = decoder_.limits().max_frames;
  std::size_t n = 0;
  bool too_many = false;
  for (;;) {
    // Past the frame cap the rest of the message is still read (a multipart message comes
    // whole), into one reused frame, so that the next message starts clean.
    if (n == frames_.size()) {
      if (n <= max_frames)
        frames_.emplace_back();
      else
        too_many = true;
    }
    zmq::message_t& frame = frames_[std::min(n, frames_.size() - 1)];
    const auto got = recv_through_signals(
        socket_, frame, n == 0 ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
    if (!got) return false;  // nothing waiting (only possible on the first frame)
    ++n;
    if (!frame.more()) break;
  }
  if (too_many) {
    dropped_.add(DropReason::too_many_frames);
    release_large(frames_.size());
    return true;
  }
  views_.clear();
  for (std::size_t i = 0; i < n; ++i)
    views_.emplace_back(static_cast<const char*>(frames_[i].data()), frames_[i].size());
  const DropReason why = decoder_.decode(views_, message_);
  if (why != DropReason::none) {
    dropped_.add(why);
    spdlog::debug("iopub: dropped a message ({})", drop_reason_name(why));
  } else {
    ++seen_;
    if (on_message_) on_message_(message_);
  }
  release_large(n);
  return true;
}

void IopubListener::release_large(std::size_t frames_used) {
  // A big output (a plot, a widget's buffers) is not kept until the next message arrives.
  constexpr std::size_t kLarge = 256 * 1024;
  for (std::size_t i = 0; i < std::min(frames_used, frames_.size()); ++i)
    if (frames_[i].size() > kLarge) frames_[i].rebuild();
  if (message_.content_bytes > kLarge) message_.content = nullptr;
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
