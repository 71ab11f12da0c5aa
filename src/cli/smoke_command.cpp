#include <spdlog/spdlog.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "kwd/cli/commands.hpp"
#include "kwd/platform/memory_reuse.hpp"
#include "kwd/smoke/junit_merge.hpp"
#include "kwd/smoke/smoke_runner.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::cli {
namespace {

bool parse_budget(const std::string& flag, const std::string& text,
                  std::optional<std::uint64_t>& into) {
  if (text.empty()) return true;
  const auto bytes = util::parse_size(text);
  if (!bytes || *bytes < 1024 * 1024) {
    spdlog::error("{}: '{}' is not a size of at least 1M (e.g. 300M, 8G)", flag, text);
    return false;
  }
  into = *bytes;
  return true;
}

// --ipython-history: "memory" (IPython's ":memory:"), "profile" (the kernel's own setting:
// an empty value, nothing added), or a history file, made absolute here (the kernels run in
// each notebook's folder) and checked: IPython fails to start on a file that is no SQLite
// database, and on a folder that does not exist.
bool parse_history(const std::string& text, std::string& into) {
  if (text == "memory") {
    into = ":memory:";
    return true;
  }
  if (text == "profile") {
    into.clear();
    return true;
  }
  const auto problem = [&](const std::string& why) {
    spdlog::error("--ipython-history: '{}' {} (give memory, profile or an SQLite file)", text, why);
    return false;
  };
  if (text.empty()) return problem("is empty");
  const std::filesystem::path file = std::filesystem::absolute(text);
  std::error_code error;
  if (!std::filesystem::is_directory(file.parent_path(), error))
    return problem("is in a folder that does not exist");
  if (std::filesystem::exists(file, error)) {
    constexpr std::string_view kHeader{"SQLite format 3\0", 16};
    std::ifstream in(file, std::ios::binary);
    std::string head(kHeader.size(), '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    const bool empty = in.gcount() == 0 && std::filesystem::file_size(file, error) == 0;
    if (!empty && head != kHeader) return problem("exists and is not an SQLite database");
  }
  into = file.string();
  return true;
}

bool parse_jobs(const std::string& text, int& into) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1 || value > 256) {
    spdlog::error("-j: '{}' is not a number from 1 to 256, nor auto", text);
    return false;
  }
  into = value;
  return true;
}

// --merge-junit: the positionals are the shards' JUnit files.
int merge_junit_files(const std::string& out, const std::vector<std::string>& inputs) {
  try {
    const std::vector<std::filesystem::path> files(inputs.begin(), inputs.end());
    const auto target = std::filesystem::absolute(out);
    util::write_file_atomically(target.parent_path(), target.filename().string(),
                                smoke::merge_junit(files), 0644);
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("--merge-junit: {}", e.what());
    return 4;
  }
}

}  // namespace

Command add_smoke_command(CLI::App& app) {
  auto options = std::make_shared<smoke::SmokeOptions>();
  auto notebooks = std::make_shared<std::vector<std::string>>();
  auto memory_limit = std::make_shared<std::string>();
  auto max_rss = std::make_shared<std::string>();
  auto max_gpu = std::make_shared<std::string>();
  auto shard = std::make_shared<std::string>();
  auto merge_junit = std::make_shared<std::string>();
  auto jobs = std::make_shared<std::string>("1");
  auto* smoke = app.add_subcommand(
      "smoke",
      "Run notebooks top to bottom, each in a fresh kernel under watch, and say per cell what\n"
      "happened; a kernel that dies or hangs gets a crash report naming the cause.\n"
      "Code cells run in order; the first failing cell stops its notebook (the rest are\n"
      "reported as not run) unless errors are allowed. Cell tags honoured: skip-execution and\n"
      "nbval-skip skip a cell; raises-exception and nbval-raises-exception let it raise.\n"
      "Notebook metadata execution.timeout and execution.allow_errors are honoured.");
  smoke->footer(
      "Exit status: 0 every cell passed; 1 a cell failed (error, timeout, budget) and no kernel\n"
      "died; 2 a kernel died or hung (or could not start); 4 a usage or input error (no such\n"
      "notebook, not a notebook, unknown kernel), said before any kernel starts.\n"
      "Example: kernel-watchdog smoke --junit smoke.xml -j 2 notebooks/*.ipynb\n"
      "Split across 4 CI jobs (job K of 4), then one JUnit report:\n"
      "  kernel-watchdog smoke --shard K/4 --durations .smoke-durations.json --junit shard-K.xml "
      "notebooks/*.ipynb\n"
      "  kernel-watchdog smoke --merge-junit smoke.xml shard-*.xml\n"
      "  (once in a while, all in one job: --store-durations --durations .smoke-durations.json)\n"
      "Memory-aware (-j auto): notebooks start as their recorded peaks fit in the memory smoke\n"
      "runs in (its cgroup's limit, else the machine's available memory), never seen ones first\n"
      "and one at a time; one that grows past what is left is stopped before the OOM killer\n"
      "acts and runs again alone, with its new peak. Keep the history to pack better next time:\n"
      "  kernel-watchdog smoke -j auto --durations .smoke-history.json --store-durations "
      "notebooks/*.ipynb");
  smoke->add_option("--kernel", options->kernel_name,
                    "Kernelspec to run (default: the notebook's metadata.kernelspec.name, else "
                    "python3); a spec wrapped by `kernelspec wrap` is unwrapped");
  smoke
      ->add_option("--cwd", options->cwd,
                   "Working directory of the kernels (default: each notebook's folder)")
      ->check(CLI::ExistingDirectory);
  smoke
      ->add_option("--timeout", options->timeout_s,
                   "Seconds a cell may run before it is interrupted and failed (default: the "
                   "notebook's execution.timeout, else 300); 0 for none")
      ->check(CLI::Range(0.0, 1e9));
  smoke
      ->add_option("--startup-timeout", options->startup_timeout_s,
                   "Seconds for a kernel to start and answer")
      ->check(CLI::Range(1.0, 1e9))
      ->capture_default_str();
  smoke
      ->add_option("--interrupt-grace", options->interrupt_grace_s,
                   "Seconds a timed-out cell has to stop after its interrupt before the kernel "
                   "is killed and a hang report written")
      ->check(CLI::Range(0.1, 1e9))
      ->capture_default_str();
  smoke->add_flag("--allow-errors", options->allow_errors,
                  "A cell that raises does not fail (a kernel death still does)");
  smoke->add_option("--memory-limit", *memory_limit,
                    "Run each kernel in a memory cgroup of its own with this limit (e.g. 2G); "
                    "an OOM kill is then reported with proof");
  smoke
      ->add_option("--thrash-timeout", options->thrash_timeout_s,
                   "Under --memory-limit: a kernel that thrashes at its limit this many seconds "
                   "(usage at the limit, its page cache squeezed to 16 MiB or less and pages "
                   "read back from disk at least 20 a second, the OOM killer not firing) is "
                   "ended with SIGKILL and its notebook fails with that cause; 0: never")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  smoke->add_option("--max-rss", *max_rss,
                    "Memory budget per notebook: the first cell whose peak RSS (the kernel's "
                    "process tree) crosses it fails; the rest keep running");
  smoke->add_option("--max-gpu", *max_gpu, "GPU memory budget per notebook (NVML), as --max-rss");
  smoke
      ->add_option("-j,--jobs", *jobs,
                   "Notebooks run at once, each in its own kernel: a number, or auto (as many as "
                   "the CPUs, and only as many as fit in memory: --memory-aware)")
      ->capture_default_str();
  smoke->add_flag("--memory-aware", options->memory_aware,
                  "Start a notebook only when the peak memory it reached last time (from "
                  "--durations, else metadata.kernel_watchdog.peak_memory) fits in the memory "
                  "smoke runs in beside the others; -j N is then a ceiling. Implied by -j auto");
  smoke
      ->add_option("--output-dir", options->output_dir,
                   "Where executed notebooks and crash reports (JSON and HTML) go")
      ->capture_default_str();
  smoke->add_option("--junit", options->junit,
                    "Write a JUnit XML file: a testsuite per notebook, a testcase per code cell");
  smoke->add_flag("--json", options->json,
                  "Print a machine-readable summary on stdout instead of the text one");
  smoke
      ->add_option("--nvml-library", options->nvml_library,
                   "NVIDIA's libnvidia-ml to load (default: libnvidia-ml.so.1)")
      ->envname("KERNEL_WATCHDOG_NVML");
  smoke
      ->add_option("--resource-spec-file", options->resource_spec_file,
                   "CTest's resource specification (JSON): the GPUs (\"gpus\": id and slots) to "
                   "place notebooks on, one slot each, as CTest places tests; each kernel is told "
                   "its GPU through CTEST_RESOURCE_GROUP_* as under CTest. Used instead of NVML's "
                   "GPUs, with -j N or -j auto")
      ->check(CLI::ExistingFile);
  smoke->add_flag_callback(
      "--no-faulthandler", [options] { options->faulthandler = false; },
      "Do not turn on Python's faulthandler in the kernels");
  auto history = std::make_shared<std::string>("memory");
  smoke
      ->add_option("--ipython-history", *history,
                   "Where IPython kernels (python -m ipykernel_launcher) keep their history: "
                   "memory (the default, as nbclient has it: a CI run stays out of your "
                   "history file, and parallel kernels do not contend for its lock), profile "
                   "(the kernel's own setting), or an SQLite file")
      ->capture_default_str();
  smoke->add_option("--shard", *shard,
                    "Run only part K of N of the notebooks (e.g. 2/4), for a suite split across "
                    "CI jobs: every N-th by path, or balanced by --durations; each notebook is "
                    "in exactly one part when every job is given the same notebooks");
  smoke->add_option("--durations", options->durations,
                    "The history file: seconds and peak memory per notebook (what "
                    "--store-durations writes; docs/smoke-history.md), which balances --shard "
                    "and packs -j auto");
  smoke->add_flag(
      "--store-durations", options->store_durations,
      "Write how long each notebook took and the memory it peaked at into the --durations "
      "file (merged with what it holds); commit it, and the next runs are balanced and packed "
      "by it");
  smoke->add_option("--merge-junit", *merge_junit,
                    "Merge the JUnit files that the jobs of a sharded run wrote (given as the "
                    "positionals) into this file, and run nothing");
  smoke
      ->add_option("notebooks", *notebooks,
                   "Notebooks (.ipynb) to run (with --merge-junit: the JUnit files to merge)")
      ->required();

  return {smoke, [=]() -> int {
            if (!merge_junit->empty()) return merge_junit_files(*merge_junit, *notebooks);
            if (!shard->empty()) {
              options->shard = smoke::parse_shard(*shard);
              if (!options->shard) {
                spdlog::error("--shard: '{}' is not K/N with 1 <= K <= N (e.g. 2/4)", *shard);
                return 4;
              }
            }
            if (*jobs == "auto") {
              options->jobs_auto = options->memory_aware = true;
            } else if (!parse_jobs(*jobs, options->jobs)) {
              return 4;
            }
            if (options->store_durations && options->durations.empty()) {
              spdlog::error("--store-durations: give the file with --durations FILE");
              return 4;
            }
            if (!parse_budget("--memory-limit", *memory_limit, options->memory_limit) ||
                !parse_budget("--max-rss", *max_rss, options->max_rss) ||
                !parse_budget("--max-gpu", *max_gpu, options->max_gpu) ||
                !parse_history(*history, options->ipython_history))
              return 4;
            options->output_dir = std::filesystem::absolute(options->output_dir);
            if (!options->cwd.empty()) options->cwd = std::filesystem::absolute(options->cwd);
            platform::keep_freed_memory_for_reuse();
            return smoke::run_smoke(*options, *notebooks);
          }};
}

}  // namespace kwd::cli
