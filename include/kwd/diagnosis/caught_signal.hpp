#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwd::diagnosis {

// A fatal signal that the kernel's own handler caught and turned into an exit: xeus-python's
// prints "Error: signal 11:", the native stack (glibc's backtrace_symbols lines, innermost
// first) and calls exit(1). The process then dies by no signal, and without this the report
// would read as an ordinary error exit.
struct CaughtSignal {
  int number = 0;
  std::string name;  // "SIGSEGV"; "signal N" for a number this platform does not name
  struct Frame {
    std::string module;    // as printed: a path or a file name
    std::string function;  // demangled; "" when the line has only an offset
    std::string offset;    // "+0x1f" after the function (or the module's start)
  };
  std::vector<Frame> frames;  // the stack printed under the line, innermost first
};

// From the line that names the signal ("Error: signal 11:") and the text that follows it.
std::optional<CaughtSignal> parse_caught_signal(std::string_view line, std::string_view after);

// One line of glibc's backtrace_symbols(): "/lib/libc.so.6(gsignal+0xc7)[0x7f5700]",
// "/usr/bin/xpython(+0x84fd)[0x5634b3]", "/lib/libx.so(_ZN1a1bEv+0x1a) [0x7f]".
std::optional<CaughtSignal::Frame> parse_backtrace_symbol(std::string_view line);

// The first frame that is not the handler's own (the innermost) nor in the C/C++ runtime or
// the interpreter: "comm_open(...) in libxeus.so.1", or "libfoo.so (+0x35a89)".
std::optional<std::string> caught_signal_culprit(const CaughtSignal& caught);

}  // namespace kwd::diagnosis
