#include <string>

#include "kwd/daemon/scheduling_priority.hpp"

namespace kwd::daemon {

// macOS schedules threads, not sessions: the nice value alone counts.
std::string raise_session_priority(int /*wanted*/) {
  return {};
}

}  // namespace kwd::daemon
