#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "kwd/cli/commands.hpp"
#include "kwd/cli/did_you_mean.hpp"
#include "kwd/platform/host.hpp"

int main(int argc, char** argv) {
  if (const auto status = kwd::platform::run_internal_step(argc, argv)) return *status;
  CLI::App app{
      "kernel-watchdog: an out-of-process crash watchdog for Jupyter kernels.\n"
      "It runs a kernel as its child, watches its memory and output, and when the kernel\n"
      "dies writes a crash report saying what killed it.",
      "kernel-watchdog"};
  app.require_subcommand(1);
  app.set_version_flag("--version", KWD_VERSION);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->envname("KERNEL_WATCHDOG_LOG_LEVEL")
      ->capture_default_str();
  std::string log_format;
  app.add_option("--log-format", log_format,
                 "text or json (one object a line, with kernel_id, cause and report fields); "
                 "default: text, or the journal's own fields when run by systemd")
      ->envname("KERNEL_WATCHDOG_LOG_FORMAT")
      ->check(CLI::IsMember({"text", "json"}));
  app.footer(
      "Start here:\n"
      "  kernel-watchdog kernelspec wrap python3   # a 'python3-watchdog' kernel for Jupyter\n"
      "  kernel-watchdog reports list              # what died, newest first\n"
      "  kernel-watchdog reports show latest       # why\n"
      "  kernel-watchdog smoke notebooks/*.ipynb   # CI: run notebooks, name every failure\n"
      "  kernel-watchdog service install           # watch every kernel, in the background");

  const std::vector<kwd::cli::Command> commands{
      kwd::cli::add_run_command(app),        kwd::cli::add_reports_command(app),
      kwd::cli::add_kernelspec_command(app), kwd::cli::add_smoke_command(app),
      kwd::cli::add_daemon_command(app),     kwd::cli::add_status_command(app),
      kwd::cli::add_service_command(app),    kwd::cli::add_completion_command(app),
      kwd::cli::add_stacks_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const auto typo = kwd::cli::find_command_typo(
        app, std::vector<std::string>(argv + 1, argv + argc), {"--log-level", "--log-format"});
    if (!typo) {
      app.exit(e);
    } else if (typo->meant) {
      std::fprintf(stderr,
                   "kernel-watchdog: no command '%s'. Did you mean:\n  kernel-watchdog %s\n",
                   typo->word.c_str(), typo->meant->c_str());
    } else {
      std::fprintf(stderr, "kernel-watchdog: no command '%s' (see kernel-watchdog --help)\n",
                   typo->word.c_str());
    }
    // A usage error, as shells and argparse say it; `smoke` keeps 1 and 2 for results.
    for (const auto& command : commands)
      if (command.app->get_name() == "smoke" && command.app->parsed()) return 4;
    return 2;
  }
  kwd::cli::setup_logging(log_level, log_format);
  try {
    for (const auto& command : commands)
      if (command.app->parsed()) return command.action();
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  return 2;
}
