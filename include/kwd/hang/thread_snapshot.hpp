#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace kwd::hang {

struct ThreadState {
  pid_t tid = 0;
  std::string name;   // comm
  std::string state;  // "S (sleeping)", "T (stopped)", ...
  std::string wchan;  // kernel function the thread sleeps in; "" when not sleeping or hidden
};

// What a process that stopped answering is doing, as far as the OS will say.
struct ProcessSnapshot {
  bool available = false;
  std::string reason;         // why not, when !available
  std::string process_state;  // the main thread's state, same wording as ThreadState::state
  std::vector<ThreadState> threads;
  std::size_t threads_total = 0;  // may exceed threads.size() (capped)
};

// Implemented per platform (Linux: /proc/PID/task/*/{stat,comm,wchan}).
ProcessSnapshot snapshot_process(pid_t pid, std::size_t max_threads = 256);

// The process exists and has not exited (a zombie counts as gone). Per platform.
bool process_alive(pid_t pid);

// The process is stopped (SIGSTOP, a debugger): it answers nothing until continued. Per platform.
bool process_stopped(pid_t pid);

// "T" -> "T (stopped)"; the letters of proc(5).
std::string describe_state(char letter);

}  // namespace kwd::hang
