#pragma once

#include <string_view>

namespace kwd::diagnosis {

// Whether a native frame's module (a path or a file name) is one every native stack passes
// through: the C library, the C++ runtime, the dynamic loader, the interpreter (Python's, R's), the
// vDSO, the watchdog's crash handler. A frame there names no culprit (the diagnosis looks past it),
// and its source line is not looked up (stacks: their separate debug info, libc6-dbg's, costs tens
// of milliseconds to decompress at every capture).
bool is_runtime_module(std::string_view module);

}  // namespace kwd::diagnosis
