#include "kwd/supervisor/kernel_argv.hpp"

#include <array>
#include <filesystem>
#include <string_view>

namespace kwd::supervisor {

std::optional<std::string> find_connection_file(const std::vector<std::string>& argv) {
  static constexpr std::array<std::string_view, 3> kFlags{"-f", "--f", "--connection-file"};
  // argv[0] is the program; scanning from 1 keeps a program called "-f" out of it.
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg == "--") break;
    for (std::string_view flag : kFlags) {
      if (arg == flag && i + 1 < argv.size()) return argv[i + 1];
      if (arg.size() > flag.size() + 1 && arg.starts_with(flag) && arg[flag.size()] == '=')
        return arg.substr(flag.size() + 1);
    }
  }
  return std::nullopt;
}

std::string kernel_id_from_connection_file(const std::string& path) {
  if (path.empty()) return {};
  std::string stem = std::filesystem::path(path).stem().string();
  if (stem.starts_with("kernel-")) stem.erase(0, 7);
  return stem;
}

}  // namespace kwd::supervisor
