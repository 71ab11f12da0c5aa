#include "kwd/launch/mirror_exit.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

namespace kwd::launch {

void exit_like(const watch::Termination& kernel_end) {
  std::fflush(nullptr);
  if (!kernel_end.signaled) ::_exit(kernel_end.exit_code);
  const int sig = kernel_end.signal;
  rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  ::sigaction(sig, &sa, nullptr);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
  ::raise(sig);
  // A signal whose default action is not to terminate (SIGCHLD, SIGCONT...) lands here.
  ::_exit(128 + sig);
}

}  // namespace kwd::launch
