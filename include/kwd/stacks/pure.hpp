#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kwd/stacks/stacks.hpp"
#include "kwd/util/demangle.hpp"

// The parts of a capture that are text in, text out: tested without a process to capture.
namespace kwd::stacks {

// The lines of a /proc text or a dump, without their newlines.
std::vector<std::string_view> lines_of(std::string_view text);

using util::demangle;

// A command line (words separated by spaces) fit for a report: a URL's credentials
// ("postgres://user:pw@host" -> "postgres://<redacted>@host") and the values of options named
// like secrets ("--token=abc", "--password=x", "API_KEY=x") are replaced by "<redacted>".
std::string redact_command(std::string_view command);

// The name of an x86_64 (or, on aarch64, that architecture's) system call number; "" unknown.
std::string syscall_name(long number);

// /proc/PID/task/TID/syscall ("202 0x7f... ..." blocked, "running", "-1 ..." not in one) ->
// the system call's name ("futex"), or "" when it runs or the text says nothing.
std::string blocked_syscall(std::string_view text);

// /proc/PID/status's "TracerPid:" value; nullopt when the field is absent.
std::optional<pid_t> tracer_pid(std::string_view status_text);

// Whether the signal mask of /proc/PID[/task/TID]/status's `field` ("SigCgt", "SigBlk",
// "SigPnd") holds signal `signo`; false when the field is absent or unreadable.
bool signal_in_mask(std::string_view status_text, std::string_view field, int signo);

// Whether /proc/PID/status's "SigCgt:" mask says the process catches signal `signo`.
inline bool catches_signal(std::string_view status_text, int signo) {
  return signal_in_mask(status_text, "SigCgt", signo);
}

// The end of the /proc/PID/maps mapping that holds `address` (a thread's stack top, for a stack
// pointer); nullopt when no mapping holds it.
std::optional<std::uint64_t> mapping_end(std::string_view maps, std::uint64_t address);

// One Python thread of a faulthandler all-threads dump.
struct PythonThreadDump {
  std::uint64_t ident = 0;  // "Thread 0x..." (pthread_self() of that thread)
  bool current = false;     // "Current thread 0x..."
  std::vector<PythonFrame> frames;
};

// Every thread block of a faulthandler dump (faulthandler.dump_traceback(all_threads=True) or
// a registered signal), in the order printed.
std::vector<PythonThreadDump> parse_python_threads(std::string_view text);

// Joins the dump's blocks to `stacks.threads` by thread pointer; the rest go to
// stacks.python_unjoined.
void join_python(ProcessStacks& stacks, std::vector<PythonThreadDump> dump);

// Whether a native frame is the interpreter's evaluation loop, where Python frames stand in for
// the native ones below it in the joined view.
bool is_eval_loop(const NativeFrame& frame);

// One line of a thread's joined view, most recent first.
struct ShownFrame {
  bool python = false;
  std::string text;  // "pause (libc.so.6)", "wait (threading.py:320)"
};

// A thread as a person reads it: native frames down to the interpreter's loop, then the Python
// frames; a thread without Python frames shows its native ones. Capped at `max_native`
// native frames.
std::vector<ShownFrame> joined_view(const ThreadStacks& thread, std::size_t max_native = 24);

// One line saying where the main thread is: "in read, at kwd_stuck (libstuck.so), from
// <module> (/tmp/ipykernel_1/2.py:3)"; "" when nothing is known of it.
std::string main_thread_summary(const ProcessStacks& stacks);

// The py-spy-like text of `kernel-watchdog stacks`: one block per thread.
std::string render_text(const ProcessStacks& stacks);

}  // namespace kwd::stacks
