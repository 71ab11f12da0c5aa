#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kwd/diagnosis/python_traceback.hpp"

namespace kwd::stacks {

// One native frame, as the unwinder and the module's symbols name it.
struct NativeFrame {
  std::uint64_t pc = 0;
  std::string module;        // the mapped file's path ("/usr/lib/.../libc.so.6"), "" when unknown
  std::string function;      // demangled; "" when the module has no symbol for pc
  std::uint64_t offset = 0;  // pc minus the function's start (or the module's, with no function)
  std::string file;          // source file, where debug info says
  int line = 0;
};

using PythonFrame = diagnosis::PythonFrame;

struct ThreadStacks {
  pid_t tid = 0;
  std::string name;     // comm
  std::string state;    // "S (sleeping)", as hang::describe_state says it
  std::string wchan;    // kernel function it sleeps in, "" when none or hidden
  std::string syscall;  // the system call it is blocked in ("futex"), "" when running or unknown
  std::vector<NativeFrame> native;   // most recent first
  bool native_truncated = false;     // the frame cap was reached
  std::string native_problem;        // why `native` is empty or short, "" when all went well
  std::uint64_t thread_pointer = 0;  // the thread's TLS base: pthread_self(), Python's ident
  std::optional<std::uint64_t> python_ident;  // the faulthandler block joined to this thread
  bool python_current = false;                // the thread that ran faulthandler's handler
  std::vector<PythonFrame> python;            // most recent first
};

// A Python thread faulthandler named that matched no native thread (no ptrace, or it ended).
struct UnjoinedPythonThread {
  std::uint64_t ident = 0;
  bool current = false;
  std::vector<PythonFrame> frames;
};

// Where every thread of one process is.
struct ProcessStacks {
  pid_t pid = 0;
  bool found = false;   // the process existed when asked
  std::string command;  // its command line, spaces between the words (capped)
  std::int64_t taken_at_ms = 0;
  std::string process_state;          // the main thread's state
  std::vector<ThreadStacks> threads;  // sorted by tid; capped
  std::size_t threads_total = 0;      // before the cap
  // What could not be had, in plain words ("native frames: libdw.so.1 is not installed ...").
  // Empty strings mean that part worked.
  std::string native_missing;
  std::string python_missing;
  std::vector<UnjoinedPythonThread> python_unjoined;
  std::int64_t frozen_us = -1;  // how long the threads were stopped; -1 when not stopped
  std::int64_t capture_ms = 0;  // the whole capture (its children's included)
  // Its descendants (DataLoader workers, multiprocessing pools), each captured the same way,
  // listed flat in the order found (breadth first), with no children of their own; capped.
  std::vector<ProcessStacks> children;
  std::size_t children_total = 0;  // descendants found, before the cap
};

struct CaptureOptions {
  std::size_t max_threads = 256;
  std::size_t max_frames = 128;
  bool native = true;
  bool python = true;
  // Each part gives up after its budget: a capture never stalls its caller (or the kernel).
  std::chrono::milliseconds python_budget{1000};
  std::chrono::milliseconds native_budget{3000};
  // How many of the process's descendants are captured too (0: none). A stuck DataLoader waits
  // on a worker: where the worker is says why.
  std::size_t max_children = 8;
};

// Captures the stacks of `pid`'s threads. Never throws for a process it cannot read: what is
// missing is said in the result. Implemented per platform.
ProcessStacks capture_stacks(pid_t pid, const CaptureOptions& options = {});

// The signal the kernel's shim dumps its Python threads on: SIGRTMIN + this. Shared with
// data/python/sitecustomize.py, which registers faulthandler on it (a test holds both equal).
inline constexpr int kPythonDumpSignalOffset = 10;

}  // namespace kwd::stacks
