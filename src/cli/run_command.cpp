#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>
#include <string_view>

#include "kwd/cli/commands.hpp"
#include "kwd/launch/launcher.hpp"
#include "kwd/platform/memory_reuse.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::cli {
namespace {

// The usage line says `--`: options of ours before it, the kernel's own command line after.
class RunUsage : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* /*app*/, std::string name) const override {
    return "Usage: " + name + " [OPTIONS] -- KERNEL_ARGV...\n";
  }
};

}  // namespace

Command add_run_command(CLI::App& app) {
  auto options = std::make_shared<launch::RunOptions>();
  auto stderr_buffer = std::make_shared<std::string>("256K");
  auto sample_hz = std::make_shared<double>(10.0);
  auto heartbeat_s = std::make_shared<double>(1.0);
  auto memory_limit = std::make_shared<std::string>();
  auto gpu_hz = std::make_shared<double>(2.0);
  auto* run = app.add_subcommand(
      "run",
      "Run a kernel under watch (the kernelspec launcher).\n"
      "Everything after `--` is the kernel's own command line, exactly as kernel.json has it.\n"
      "The kernel keeps our process group, stdio and exit status: front ends see no\n"
      "difference, except a crash report when it dies unexpectedly.\n"
      "A kernel manager that is about to end the kernel itself may send us SIGUSR2 first\n"
      "(our pid alone): the end that follows gets no report, whatever it is (the provisioner\n"
      "does this before jupyter_client's shutdown, which interrupts the kernel first).");
  run->add_flag("--forward-sigint", options->forward_sigint,
                "Pass SIGINT on to the kernel. Only for launchers that signal our pid alone: "
                "jupyter_client signals the whole process group, so the kernel already got it.");
  run->add_flag_callback(
      "--no-faulthandler", [options] { options->kernel.faulthandler = false; },
      "Do not turn on Python's faulthandler in the kernel. By default a private "
      "sitecustomize start-up hook (first on the kernel's PYTHONPATH, then removed from it) and "
      "PYTHONFAULTHANDLER=1 make a dying Python kernel print its stack where the "
      "crash report can keep it.");
  // KERNEL_WATCHDOG_NO_NOTICE is read here, not by CLI11: a value it could not parse would be
  // a usage error, and the kernel would not start.
  const char* no_notice = std::getenv("KERNEL_WATCHDOG_NO_NOTICE");
  const std::string_view no_notice_value = no_notice != nullptr ? no_notice : "";
  options->kernel.death_notices = no_notice_value.empty() || no_notice_value == "0" ||
                                  no_notice_value == "false" || no_notice_value == "no";
  run->add_flag_callback(
      "--no-notice", [options] { options->kernel.death_notices = false; },
      "After a crash, the kernel its manager restarts shows why the last one died once, "
      "above the output of its first cell (the headline and the command that shows the "
      "report). This turns that off; so does KERNEL_WATCHDOG_NO_NOTICE=1.");
  run->add_option(
      "--report-dir", options->report_dir,
      "Where crash reports go (default: $KERNEL_WATCHDOG_REPORT_DIR, else "
      "$XDG_STATE_HOME/kernel-watchdog/reports, else ~/.local/state/kernel-watchdog/reports). "
      "The store keeps at most 1000 reports, 512 MiB and 90 days, oldest removed first; "
      "KERNEL_WATCHDOG_REPORT_CAP=COUNT[,SIZE[,DAYS]] (e.g. 200 or 200,100M,30) sets other caps");
  run->add_option("--stderr-buffer", *stderr_buffer,
                  "How much of the kernel's stderr to keep for the report")
      ->capture_default_str();
  run->add_option("--sample-rate", *sample_hz, "Memory samples per second")
      ->check(CLI::Range(0.1, 1000.0))
      ->capture_default_str();
  run->add_option("--heartbeat-interval", *heartbeat_s,
                  "Seconds between heartbeat pings; each waits at most 1 s (or the interval, "
                  "if shorter) for its answer")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  run->add_option("--heartbeat-misses", options->kernel.listener.heartbeat.misses_to_hang,
                  "Consecutive missed heartbeats, with the process alive, that make a hang "
                  "(and a hang report); 0 turns hang reports off")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  run->add_option("--last-cells", options->kernel.listener.last_cells,
                  "How many finished cells a report lists, with their memory deltas")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  run->add_option("--memory-limit", *memory_limit,
                  "Run the kernel in a memory cgroup of its own with this limit on memory and "
                  "swap (e.g. 300M, 8G), so an OOM kill takes the kernel alone and the report "
                  "can prove it. Linux; where cgroups are not writable the kernel runs "
                  "unlimited and the report says why.");
  auto thrash_s = std::make_shared<int>(30);
  run->add_option("--thrash-timeout", *thrash_s,
                  "Under --memory-limit: a kernel that thrashes at its limit this many seconds "
                  "(usage at the limit, its page cache squeezed to 16 MiB or less and pages read "
                  "back from disk at least 20 a second: the code it runs evicted and read again, "
                  "while the OOM killer never fires) is ended with SIGKILL, and the report says "
                  "so. A kernel that reads data through the room it left itself is not touched. "
                  "0: never")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  run->add_option("--nvml-library", options->kernel.nvml_library,
                  "NVIDIA's libnvidia-ml to load (default: libnvidia-ml.so.1 from the dynamic "
                  "linker's search path)")
      ->envname("KERNEL_WATCHDOG_NVML");
  run->add_option("--gpu-rate", *gpu_hz, "GPU samples per second (NVML)")
      ->check(CLI::Range(0.1, 100.0))
      ->capture_default_str();
  run->add_option("kernel_argv", options->kernel.argv, "The kernel's command line, after `--`")
      ->required();
  run->formatter(std::make_shared<RunUsage>());
  run->footer(
      "Example (what `kernelspec wrap` puts in kernel.json):\n"
      "  kernel-watchdog run --memory-limit 8G -- python3 -m ipykernel_launcher -f conn.json");

  return {
      run, [=]() -> int {
        const auto bytes = util::parse_size(*stderr_buffer);
        if (!bytes || *bytes < 1024) {
          spdlog::error("--stderr-buffer: '{}' is not a size of at least 1K (e.g. 256K, 4M)",
                        *stderr_buffer);
          return 2;
        }
        options->kernel.stderr_buffer_bytes = *bytes;
        if (!memory_limit->empty()) {
          const auto limit = util::parse_size(*memory_limit);
          if (!limit || *limit < 1024 * 1024) {
            spdlog::error("--memory-limit: '{}' is not a size of at least 1M (e.g. 300M, 8G)",
                          *memory_limit);
            return 2;
          }
          options->kernel.memory_limit = *limit;
        }
        options->kernel.thrash_timeout = std::chrono::seconds(*thrash_s);
        options->kernel.gpu_interval =
            std::chrono::milliseconds(std::max<long>(10, static_cast<long>(1000.0 / *gpu_hz)));
        auto& heartbeat = options->kernel.listener.heartbeat;
        heartbeat.interval = std::chrono::milliseconds(static_cast<long>(*heartbeat_s * 1000.0));
        heartbeat.timeout = std::min(heartbeat.interval, std::chrono::milliseconds(1000));
        options->kernel.sample_interval =
            std::chrono::milliseconds(std::max<long>(1, static_cast<long>(1000.0 / *sample_hz)));
        platform::return_large_blocks_at_once();
        launch::Launcher launcher(*options);
        return launcher.run();
      }};
}

}  // namespace kwd::cli
