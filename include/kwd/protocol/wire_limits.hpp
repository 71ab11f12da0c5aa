#pragma once

#include <cstddef>

namespace kwd::protocol {

// Caps on what one message may be. The frame cap is also handed to libzmq
// (ZMQ_MAXMSGSIZE), which refuses a larger frame before buffering it.
struct WireLimits {
  std::size_t max_frame_bytes = 32u << 20;
  std::size_t max_message_bytes = 64u << 20;
  std::size_t max_frames = 256;  // idents + delimiter + 5 + buffers
  std::size_t replay_window = 4096;
};

}  // namespace kwd::protocol
