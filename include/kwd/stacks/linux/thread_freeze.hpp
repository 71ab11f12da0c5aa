#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace kwd::stacks::linux_stacks {

// What unwinding one thread needs, copied while it was stopped: its registers (as DWARF
// numbers them) and the used part of its stack. Unwinding then runs on the copy, after the
// thread has been let go.
struct ThreadImage {
  pid_t tid = 0;
  std::string problem;  // why there is no image ("" when there is one)
  std::vector<std::uint64_t> dwarf_registers;
  std::uint64_t pc = 0;
  std::uint64_t thread_pointer = 0;  // pthread_self(): x86_64's fs_base, below aarch64's TLS base
  std::uint64_t stack_at = 0;        // address of stack's first byte (the stack pointer)
  std::string stack;                 // bytes from the stack pointer up to the stack's top, capped
};

struct FrozenProcess {
  std::vector<ThreadImage> images;
  std::int64_t frozen_us = -1;  // from the first thread stopped to the last let go
};

// Stops each of `tids` with PTRACE_SEIZE + PTRACE_INTERRUPT (no SIGSTOP: nothing the process
// or its parent can see), copies its registers and stack, and detaches them all, waiting for
// the stops no longer than `budget`. Threads that do not stop in time (uninterruptible
// sleep) keep a pending interrupt: the caller must be a process that exits after this, so
// that the kernel detaches them (the unwinding child, unwind_child.hpp).
FrozenProcess freeze_and_copy(pid_t pid, const std::vector<pid_t>& tids,
                              std::chrono::milliseconds budget,
                              std::size_t max_stack_bytes = 512 * 1024);

}  // namespace kwd::stacks::linux_stacks
