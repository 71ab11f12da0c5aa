#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kwd/stacks/stacks.hpp"

namespace kwd::stacks {

// What kernel-watchdog-crash.so (src/stacks/linux/crash_handler/) says from inside the kernel's
// handler of a fatal signal, while that thread waits for the watchdog to read its stack.
struct FatalSignal {
  pid_t pid = 0;
  pid_t tid = 0;
  int signal = 0;
  int code = 0;               // si_code: how the signal came (SEGV_MAPERR, SI_TKILL, ...)
  std::uint64_t address = 0;  // si_addr: the address that faulted (SIGSEGV, SIGBUS)
  std::uint64_t pc = 0;       // the faulting instruction, from the saved context
};

// "kwd-crash 1 pid=.. tid=.. sig=.. code=.. addr=0x.. pc=0x..\n" -> its fields; nullopt for any
// other text (the kernel's own code can write to that socket: nothing in it is trusted).
std::optional<FatalSignal> parse_fatal_signal(std::string_view message);

// The faulting thread's native stack at the signal, from the faulting instruction down.
struct CrashStack {
  FatalSignal fault;
  std::vector<NativeFrame> frames;  // most recent first, the handler's own frames cut off
  bool truncated = false;           // the frame cap was reached
  std::string missing;              // why frames are missing or short; "" when none are
  std::int64_t frozen_us = -1;
  std::int64_t capture_ms = 0;
  std::int64_t reported_at_ms = 0;  // when the handler's message reached the watchdog (epoch ms)
  // Read from the system's crash report instead (macOS): its path, and what the libraries said
  // before the death as the report kept it ("libsystem_c.dylib: abort() called").
  std::string system_report;
  std::vector<std::string> messages;
};

// SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP: the signals the handler reports.
bool is_crash_signal(int signal);

// Drops the frames above the one at `pc` (the crash handler, the signal trampoline): what is
// left starts at the faulting instruction. False (nothing dropped) when no frame is at `pc`.
bool cut_at_fault(std::vector<NativeFrame>& frames, std::uint64_t pc);

// Reads the faulting thread's stack while it waits in the handler (at most `budget`). Never
// throws: what could not be had is in `missing`. Implemented per platform.
CrashStack capture_crash_stack(const FatalSignal& fault, std::chrono::milliseconds budget);

// The handler library the shim loads into a kernel: beside the program, or in
// ../lib/kernel-watchdog/ (an installed tree); $KERNEL_WATCHDOG_CRASH_LIBRARY first. Empty when
// there is none (a crash then has no native frames, and the report says why).
std::filesystem::path crash_handler_library();

inline constexpr std::string_view kCrashHandlerLibraryName = "kernel-watchdog-crash.so";

}  // namespace kwd::stacks
