#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kwd::util {

// The first executable called `name` on $PATH (or `name` itself if it holds a '/').
std::optional<std::filesystem::path> find_on_path(const std::string& name);
// Every executable called `name` on $PATH, in $PATH's order.
std::vector<std::filesystem::path> find_all_on_path(const std::string& name);

}  // namespace kwd::util
