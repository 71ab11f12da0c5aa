#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kwd::cli {

// Shell completion for the command tree `app` holds, written from that tree (so it cannot
// drift from the commands and options there are): command and subcommand names, each
// command's options, directories or files for the options that take paths, the choices of
// --log-level and --log-format, notebooks for `smoke`, commands after `run --`.
std::string bash_completion_script(const CLI::App& app);
std::string zsh_completion_script(const CLI::App& app);

}  // namespace kwd::cli
