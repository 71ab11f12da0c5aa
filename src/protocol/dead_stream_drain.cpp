#include "kwd/protocol/dead_stream_drain.hpp"

#include <zmq.h>

#include <algorithm>
#include <cerrno>

#include "kwd/util/clock.hpp"

namespace kwd::protocol {
namespace {

constexpr long kStragglerWaitMs = 1;

}  // namespace

void drain_dead_stream(const DeadStream& stream, std::chrono::milliseconds quiet,
                       std::chrono::milliseconds budget) {
  const std::int64_t deadline = util::steady_ns() + budget.count() * 1'000'000;
  for (;;) {
    if (!stream.connected()) {
      for (int look = 0; look < 2 && util::steady_ns() < deadline; ++look) {
        stream.read_waiting();
        zmq_pollitem_t item = {stream.socket, 0, ZMQ_POLLIN, 0};
        if (look == 0 && zmq_poll(&item, 1, kStragglerWaitMs) <= 0) break;
      }
      return;
    }
    const std::int64_t left_ms = (deadline - util::steady_ns()) / 1'000'000;
    if (left_ms <= 0) return;
    zmq_pollitem_t items[2] = {{stream.socket, 0, ZMQ_POLLIN, 0},
                               {stream.monitor, 0, ZMQ_POLLIN, 0}};
    const int count = stream.monitor != nullptr ? 2 : 1;
    const long wait = static_cast<long>(std::min<std::int64_t>(left_ms, quiet.count()));
    const int ready = zmq_poll(items, count, wait);
    if (ready < 0 && zmq_errno() == EINTR) continue;  // a signal, not the end of the output
    if (ready <= 0) return;                           // quiet (or failed): nothing more is coming
    // A monitor event is read by `connected` at the top of the loop.
    if (items[0].revents & ZMQ_POLLIN) stream.read_waiting();
  }
}

}  // namespace kwd::protocol
