#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

namespace kwd::util {

// "cannot read /proc/42/maps: Permission denied": what failed, on which path, and the system's
// reason, as every file error the user sees should say it. Pass errno right after the call.
inline std::string cannot(std::string_view what, std::string_view path, int err) {
  std::string text = "cannot ";
  text += what;
  text += ' ';
  text += path;
  if (err != 0) {
    text += ": ";
    text += std::strerror(err);
  }
  return text;
}

}  // namespace kwd::util
