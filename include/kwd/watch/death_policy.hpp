#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kwd/watch/death_source.hpp"

namespace kwd::watch {

// A signal the watchdog itself was sent, and when (wall clock, ms).
struct ReceivedSignal {
  int signal = 0;
  std::int64_t at_ms = 0;
};
using ReceivedSignals = std::vector<ReceivedSignal>;

// How long after the manager asked a kernel to stop (a termination signal to the process
// group) an end still counts as that request: jupyter_client waits shutdown_wait_time (5 s)
// before it escalates to SIGKILL; the rest is slack for a loaded machine.
inline constexpr std::int64_t kRequestedWindowMs = 10'000;

// Whether the kernel's end was asked for, so that no crash report is due: a clean exit; a
// shutdown_reply the kernel published; the very termination signal (SIGTERM, SIGHUP,
// SIGQUIT) that the watchdog was sent too; or any end within kRequestedWindowMs of such a
// signal (a kernel that handles SIGTERM with sys.exit(143), the manager's SIGKILL after its
// grace period). A kernel that survived a SIGTERM and died minutes later did not die of it.
bool death_was_requested(const ProcessEnd& end, bool shutdown_reply_seen,
                         const ReceivedSignals& received, std::int64_t died_at_ms);

bool is_termination_signal(int signal);

// "SIGTERM", ... in arrival order, for the report's termination.watchdog_received.
std::vector<std::string> signal_names(const ReceivedSignals& received);

}  // namespace kwd::watch
