#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kwd::diagnosis {

// Literal text a line must contain for an ECMAScript pattern to match it: one string per
// top-level alternative (the line must contain at least one of them). Empty when some
// alternative has no literal of at least `min_length` characters, i.e. no cheap filter.
//
// Why: std::regex costs microseconds per line and signature; a substring search rules out
// nearly every line first, so scanning a full stderr tail stays far below a millisecond.
std::vector<std::string> required_literals(std::string_view pattern, std::size_t min_length = 3);

// True when no filter is known or the line contains one of the literals.
bool may_match(std::string_view line, const std::vector<std::string>& literals);

}  // namespace kwd::diagnosis
