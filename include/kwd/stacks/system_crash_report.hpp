#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kwd/stacks/crash.hpp"

// The crash report the operating system itself writes for a process that died of a fatal
// signal: macOS's ReportCrash (~/Library/Logs/DiagnosticReports/*.ips). There the kernel gets
// no crash handler of ours: the system has already stopped the thread, named its frames with
// every image's symbols and kept what the libraries said (abort() called, malloc's complaint).
namespace kwd::stacks {

// What one .ips crash report says of the process and its faulting thread.
struct SystemCrashReport {
  pid_t pid = 0;
  std::string process;              // "python3.12", procName
  std::string exception;            // "EXC_BAD_ACCESS (SIGSEGV): KERN_INVALID_ADDRESS at 0x0"
  int signal = 0;                   // this platform's number of exception.signal; 0 when not named
  std::uint64_t thread_id = 0;      // the faulting thread's system-wide id
  std::uint64_t pc = 0;             // its program counter (pc on arm64, rip on x86_64); 0 unknown
  std::uint64_t address = 0;        // the address that faulted (far, cr2), 0 unknown
  std::vector<NativeFrame> frames;  // the faulting thread's, most recent first
  std::vector<std::string> messages;  // "libsystem_c.dylib: abort() called" (asi)
};

// An .ips file's text: a metadata line, then the report. nullopt when it is not a crash report
// (bug_type other than 309), or its JSON is malformed or says no pid. Frames name their image
// by path (the name when the path is hidden), demangle C++ names and keep file:line where the
// report has it. Never throws.
std::optional<SystemCrashReport> parse_ips_crash(std::string_view text);

// The report's faulting thread as the report's crash_stack, capped at `max_frames`.
CrashStack crash_stack_from(const SystemCrashReport& report, std::size_t max_frames = 128);

// Whether this platform writes such reports (macOS), so that a kernel's crash is read from its
// report after the death instead of from a handler in the kernel.
bool system_writes_crash_reports();

// Waits up to `budget` for the system's crash report of `pid`, which died at `died_at_ms`
// (epoch ms), and reads its faulting thread. Never throws: what could not be had is in
// `missing`, with no frames. Implemented per platform.
CrashStack read_system_crash_report(pid_t pid, int signal, std::int64_t died_at_ms,
                                    std::chrono::milliseconds budget);

}  // namespace kwd::stacks
