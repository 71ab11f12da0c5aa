#include <spdlog/spdlog.h>

#include <memory>

#include "kwd/cli/commands.hpp"
#include "kwd/supervisor/supervisor.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::cli {

Command add_run_command(CLI::App& app) {
  auto options = std::make_shared<supervisor::RunOptions>();
  auto stderr_buffer = std::make_shared<std::string>("256K");
  auto sample_hz = std::make_shared<double>(10.0);
  auto* run = app.add_subcommand(
      "run",
      "Run a kernel under watch (the kernelspec launcher).\n"
      "Everything after `--` is the kernel's own command line, exactly as kernel.json has it.\n"
      "The kernel keeps our process group, stdio and exit status: front ends see no\n"
      "difference, except a crash report when it dies unexpectedly.");
  run->add_flag("--forward-sigint", options->forward_sigint,
                "Pass SIGINT on to the kernel. Only for launchers that signal our pid alone: "
                "jupyter_client signals the whole process group, so the kernel already got it.");
  run->add_option(
      "--report-dir", options->report_dir,
      "Where crash reports go (default: $KERNEL_WATCHDOG_REPORT_DIR, else "
      "$XDG_STATE_HOME/kernel-watchdog/reports, else ~/.local/state/kernel-watchdog/reports)");
  run->add_option("--stderr-buffer", *stderr_buffer,
                  "How much of the kernel's stderr to keep for the report")
      ->capture_default_str();
  run->add_option("--sample-rate", *sample_hz, "Memory samples per second")
      ->check(CLI::Range(0.1, 1000.0))
      ->capture_default_str();
  run->add_option("kernel_argv", options->kernel_argv, "The kernel's command line")->required();

  return {run, [=]() -> int {
            const auto bytes = util::parse_size(*stderr_buffer);
            if (!bytes || *bytes < 1024) {
              spdlog::error("--stderr-buffer: '{}' is not a size of at least 1K (e.g. 256K, 4M)",
                            *stderr_buffer);
              return 2;
            }
            options->stderr_buffer_bytes = *bytes;
            options->sample_interval = std::chrono::milliseconds(
                std::max<long>(1, static_cast<long>(1000.0 / *sample_hz)));
            supervisor::Supervisor sup(*options);
            return sup.run();
          }};
}

}  // namespace kwd::cli
