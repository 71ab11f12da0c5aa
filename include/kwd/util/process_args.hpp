#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwd::util {

// A command line and environment as the operating system hands another process's over.
struct ProcessArgs {
  std::vector<std::string> argv;
  std::vector<std::string> environment;  // "NAME=value" entries
};

// Linux's /proc/PID/cmdline and /proc/PID/environ: entries each ended by a NUL (the last
// one's NUL may be missing when the text was cut short).
std::vector<std::string> split_nul(std::string_view text);

// macOS's KERN_PROCARGS2 sysctl: a native int argc, the executable's path and its NUL
// padding, then argc arguments and the environment, each NUL-terminated, the environment
// ending at an empty entry or the buffer's end. nullopt when the buffer is too short for
// its argc or has no argument at all (the process image is being replaced, or a zombie).
std::optional<ProcessArgs> parse_kern_procargs2(std::string_view buffer);

// The value of `name` in "NAME=value" entries; nullopt when unset.
std::optional<std::string> environment_value(const std::vector<std::string>& environment,
                                             std::string_view name);

}  // namespace kwd::util
