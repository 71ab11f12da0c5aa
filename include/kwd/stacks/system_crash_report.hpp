#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
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

// What an .ips file is, by its metadata line: a crash report (bug_type 309), another kind of
// report (a hang, a resource report: never one to wait for), or not readable (yet: a report
// may still be being written).
enum class IpsKind { crash, other, unreadable };
IpsKind ips_kind(std::string_view text);

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

// The search for one dead process's report, a look at a time, so that the caller's loop runs
// between looks (smoke's other kernels go on being watched while the system writes it).
struct SystemCrashReportSearch {
  pid_t pid = 0;
  int signal = 0;
  std::int64_t died_at_ms = 0;
  std::set<std::string> read_before;  // reports of other processes or kinds: not read again
};

// One look through the directories the system writes its reports to: the crash stack of
// `search.pid` once its report is there. Never throws. Implemented per platform.
std::optional<CrashStack> look_for_system_crash_report(SystemCrashReportSearch& search);

// What the report says when the search ran out of time, `waited` in all.
CrashStack system_crash_report_not_found(const SystemCrashReportSearch& search,
                                         std::chrono::milliseconds waited);

}  // namespace kwd::stacks
