#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace kwd::cli {

// Each command registers its subcommand and says what to run when it was chosen.
struct Command {
  CLI::App* app;
  std::function<int()> action;
};

Command add_run_command(CLI::App& app);
Command add_reports_command(CLI::App& app);
Command add_kernelspec_command(CLI::App& app);
Command add_smoke_command(CLI::App& app);
Command add_daemon_command(CLI::App& app);
Command add_status_command(CLI::App& app);
Command add_service_command(CLI::App& app);
Command add_completion_command(CLI::App& app);
Command add_stacks_command(CLI::App& app);

// The process's logger on stderr at `level`. `format`: "text" (a line a person reads),
// "json" (one object a line, with the structured fields), or "" (text, unless stderr is
// systemd's journal: then records go to it with their fields). Throws std::invalid_argument
// for another format.
void setup_logging(const std::string& level, const std::string& format = "");

}  // namespace kwd::cli
