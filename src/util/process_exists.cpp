#include "kwd/util/process_exists.hpp"

#include <signal.h>

#include <cerrno>
#include <charconv>

namespace kwd::util {

bool process_exists(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

std::optional<pid_t> pid_after_prefix(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return std::nullopt;
  const std::string_view rest = name.substr(prefix.size());
  pid_t pid = 0;
  if (std::from_chars(rest.data(), rest.data() + rest.size(), pid).ec != std::errc())
    return std::nullopt;
  return pid;
}

}  // namespace kwd::util
