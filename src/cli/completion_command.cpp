#include <iostream>
#include <memory>

#include "kwd/cli/commands.hpp"
#include "kwd/cli/completion_script.hpp"

namespace kwd::cli {

Command add_completion_command(CLI::App& app) {
  auto shell = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "completion",
      "Print the shell completion script for bash or zsh (installed packages put it where\n"
      "the shell finds it).\n"
      "Example: source <(kernel-watchdog completion bash)");
  cmd->add_option("shell", *shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
  return {
      cmd, [&app, shell] {
        std::cout << (*shell == "bash" ? bash_completion_script(app) : zsh_completion_script(app));
        return 0;
      }};
}

}  // namespace kwd::cli
