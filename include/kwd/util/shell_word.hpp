#pragma once

#include <string>

namespace kwd::util {

// `text` as one POSIX shell word: as it is when it holds nothing the shell would read,
// else in single quotes. For commands we print for people to paste.
std::string shell_word(const std::string& text);

}  // namespace kwd::util
