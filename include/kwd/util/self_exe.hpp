#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace kwd::util {

// Absolute path of the running kernel-watchdog executable.
std::filesystem::path self_executable();

// The first executable called `name` on $PATH (or `name` itself if it holds a '/').
std::optional<std::filesystem::path> find_on_path(const std::string& name);

}  // namespace kwd::util
