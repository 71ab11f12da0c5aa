#pragma once

#include <filesystem>
#include <string>

namespace kwd::platform {

// Opens a file with the desktop's default application: xdg-open on Linux and the BSDs,
// open on macOS (both found on PATH). Waits for the opener, which returns as soon as it has
// handed the file over. Returns an empty string, or what went wrong.
std::string open_with_default_app(const std::filesystem::path& file);

// Where generated files meant for people go: $XDG_CACHE_HOME/kernel-watchdog/<what>, else
// ~/.cache/kernel-watchdog/<what>.
std::filesystem::path user_cache_dir(const std::string& what);

}  // namespace kwd::platform
