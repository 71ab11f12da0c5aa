#pragma once

#include <string>

namespace kwd::watch {

// How a process ended, as waitpid reported it.
struct Termination {
  bool signaled = false;
  int exit_code = 0;  // meaningful when !signaled
  int signal = 0;     // meaningful when signaled
  bool core_dumped = false;

  static Termination from_wait_status(int status);
  [[nodiscard]] bool clean_exit() const { return !signaled && exit_code == 0; }
  // "killed by SIGSEGV (core dumped)", "exited with status 3"
  [[nodiscard]] std::string describe() const;
  // What subprocess.Popen.returncode (and so jupyter_client) reports: -signal or the code.
  [[nodiscard]] int popen_returncode() const { return signaled ? -signal : exit_code; }
};

// "SIGSEGV" for 11; "SIG42" for numbers without a name.
std::string signal_name(int signal);

}  // namespace kwd::watch
