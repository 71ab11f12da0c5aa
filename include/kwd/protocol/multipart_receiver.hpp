#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>
#include <zmq.hpp>

namespace kwd::protocol {

// Reads whole multipart messages from a socket into frames that are reused between
// messages. Past `max_frames` the rest of a message is still read (a multipart message
// comes whole), into one reused frame, so that the next message starts clean.
class MultipartReceiver {
 public:
  enum class Result { nothing_waiting, message, too_many_frames };

  explicit MultipartReceiver(std::size_t max_frames);
  // Throws zmq::error_t as recv() does (EINTR is retried).
  Result receive(zmq::socket_t& socket);
  // The frames of the last message received.
  [[nodiscard]] std::span<const std::string_view> frames() const { return views_; }
  // A big output (a plot, a widget's buffers) is not kept until the next message arrives.
  void release_large();

 private:
  std::size_t max_frames_;
  std::size_t used_ = 0;
  std::vector<zmq::message_t> frames_;
  std::vector<std::string_view> views_;
};

}  // namespace kwd::protocol
