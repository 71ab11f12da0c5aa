#include "kwd/watch/termination.hpp"

#include <sys/wait.h>

#include "kwd/util/signal_name.hpp"

namespace kwd::watch {

Termination Termination::from_wait_status(int status) {
  Termination t;
  if (WIFSIGNALED(status)) {
    t.signaled = true;
    t.signal = WTERMSIG(status);
#ifdef WCOREDUMP
    t.core_dumped = WCOREDUMP(status);
#endif
  } else if (WIFEXITED(status)) {
    t.exit_code = WEXITSTATUS(status);
  }
  return t;
}

std::string Termination::describe() const {
  if (!signaled) return "exited with status " + std::to_string(exit_code);
  return "killed by " + signal_name(signal) + (core_dumped ? " (core dumped)" : "");
}

std::string signal_name(int signal) {
  return util::signal_name(signal).value_or("SIG" + std::to_string(signal));
}

}  // namespace kwd::watch
