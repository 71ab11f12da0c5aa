#pragma once

#include <optional>
#include <string>

namespace kwd::util {

// This platform's name of a signal number: "SIGSEGV" for 11 on Linux; none for a number it
// does not name (the real-time signals among them). Callers say such a number their own way.
std::optional<std::string> signal_name(int signal);

}  // namespace kwd::util
