#include "kwd/protocol/multipart_receiver.hpp"

#include <algorithm>

#include "kwd/protocol/kernel_socket.hpp"

namespace kwd::protocol {

MultipartReceiver::MultipartReceiver(std::size_t max_frames) : max_frames_(max_frames) {
  frames_.reserve(16);
  views_.reserve(16);
}

MultipartReceiver::Result MultipartReceiver::receive(zmq::socket_t& socket) {
  std::size_t n = 0;
  bool too_many = false;
  views_.clear();
  for (;;) {
    if (n == frames_.size()) {
      if (n <= max_frames_)
        frames_.emplace_back();
      else
        too_many = true;
    }
    zmq::message_t& frame = frames_[std::min(n, frames_.size() - 1)];
    const auto got = recv_through_signals(
        socket, frame, n == 0 ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
    if (!got) return Result::nothing_waiting;  // only possible on the first frame
    ++n;
    if (!frame.more()) break;
  }
  used_ = std::min(n, frames_.size());
  if (too_many) return Result::too_many_frames;
  for (std::size_t i = 0; i < n; ++i)
    views_.emplace_back(static_cast<const char*>(frames_[i].data()), frames_[i].size());
  return Result::message;
}

void MultipartReceiver::release_large() {
  constexpr std::size_t kLarge = 256 * 1024;
  for (std::size_t i = 0; i < used_; ++i)
    if (frames_[i].size() > kLarge) frames_[i].rebuild();
  views_.clear();
}

}  // namespace kwd::protocol
