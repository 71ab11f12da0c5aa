#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwd::cli {

// A command line that names a command (or a command's subcommand) this program does not
// have: the first such word, and the command line that was probably meant ("reports list"
// for `report list`), when one is near. Nothing when every command word is known. `args` are
// argv[1...]; `options_with_values` are the global options whose value is the next word.
struct CommandTypo {
  std::string word;
  std::optional<std::string> meant;
};
std::optional<CommandTypo> find_command_typo(const CLI::App& app,
                                             const std::vector<std::string>& args,
                                             const std::vector<std::string>& options_with_values);

// Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`.
std::size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace kwd::cli
