#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

namespace kwd::stacks::linux_stacks {

// The name of the memory file the kernel's shim (data/python/sitecustomize.py) registers
// faulthandler's all-threads dump on; /proc/PID/fd/N reads "/memfd:<this> (deleted)".
inline constexpr const char* kPythonDumpMemfd = "kernel-watchdog-python-stacks";

struct PythonDump {
  std::string text;     // faulthandler's output, "" when none
  std::string missing;  // why there is none, in plain words
};

// Asks a kernel started with the shim for every Python thread's frames: finds the shim's
// memory file among the kernel's descriptors, checks that the kernel catches the dump signal
// (an uncaught real-time signal would kill it), empties the file, sends the signal and reads
// what faulthandler wrote, waiting no longer than `budget`. Two askers at once take turns
// (flock on the file). Never throws.
//
// `thread` (0: none) is a thread to send the signal to, one that is not in uninterruptible
// sleep: the dump is then known to be whole the moment that thread has left the handler (the
// signal neither pending nor blocked in its /proc status), with no wait for the file to stop
// growing.
PythonDump request_python_dump(pid_t pid, pid_t thread, std::chrono::milliseconds budget);

}  // namespace kwd::stacks::linux_stacks
