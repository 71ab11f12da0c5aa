#include "kwd/watch/death_policy.hpp"

#include <signal.h>

namespace kwd::watch {

bool is_termination_signal(int s) {
  return s == SIGTERM || s == SIGHUP || s == SIGQUIT;
}

bool death_was_requested(const ProcessEnd& end, bool shutdown_reply_seen,
                         const ReceivedSignals& received, std::int64_t died_at_ms) {
  if (end.status && end.status->clean_exit()) return true;
  // The manager asked on the wire; whatever the kernel exited with afterwards (atexit
  // handlers, a killpg after the grace period...) follows from that request.
  if (shutdown_reply_seen) return true;
  for (const auto& r : received) {
    if (!is_termination_signal(r.signal)) continue;
    if (end.status && end.status->signaled && end.status->signal == r.signal) return true;
    if (died_at_ms >= r.at_ms && died_at_ms - r.at_ms <= kRequestedWindowMs) return true;
  }
  return false;
}

std::vector<std::string> signal_names(const ReceivedSignals& received) {
  std::vector<std::string> names;
  names.reserve(received.size());
  for (const auto& r : received)
    names.push_back(signal_name(r.signal));
  return names;
}

}  // namespace kwd::watch
