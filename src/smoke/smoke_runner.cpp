#include "kwd/smoke/smoke_runner.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <set>

#include "kwd/loop/event_loop.hpp"
#include "kwd/loop/signal_pipe.hpp"
#include "kwd/probes/host_sources.hpp"
#include "kwd/report/terminal_text.hpp"
#include "kwd/smoke/notebook_run.hpp"
#include "kwd/smoke/result_writers.hpp"
#include "kwd/smoke/sharding.hpp"
#include "kwd/util/private_files.hpp"

namespace kwd::smoke {
namespace {

struct Planned {
  Notebook notebook;
  kernelspec::Kernelspec spec;
  std::string executed_name;
};

// "analysis.ipynb"; a second notebook of the same name (from another folder) gets
// "analysis-2.ipynb".
std::string unique_output_name(const std::filesystem::path& path, std::set<std::string>& used) {
  const std::string stem = path.stem().string().empty() ? "notebook" : path.stem().string();
  std::string name = stem + ".ipynb";
  for (int n = 2; !used.insert(name).second; ++n)
    name = stem + "-" + std::to_string(n) + ".ipynb";
  return name;
}

std::string known_kernels() {
  std::string names;
  for (const auto& spec : kernelspec::find_all())
    names += (names.empty() ? "" : ", ") + spec.name;
  return names.empty() ? "none found on the Jupyter data path" : names;
}

void write_text_file(const std::filesystem::path& path, const std::string& text, bool append) {
  std::FILE* f = std::fopen(path.c_str(), append ? "a" : "w");
  if (f == nullptr) throw std::runtime_error(path.string() + ": " + std::strerror(errno));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) throw std::runtime_error(path.string() + ": write failed");
}

}  // namespace

int run_smoke(const SmokeOptions& options, const std::vector<std::string>& all_notebooks) {
  // Everything that can be known wrong is known before any kernel starts.
  Durations durations;
  try {
    if (!options.durations.empty()) durations = load_durations(options.durations);
  } catch (const std::exception& e) {
    std::cerr << "kernel-watchdog smoke: --durations " << report::terminal_safe(e.what()) << "\n";
    return 4;
  }
  const std::vector<std::string> notebook_paths =
      options.shard ? select_shard(all_notebooks, *options.shard, durations) : all_notebooks;
  if (options.shard)
    std::cerr << fmt::format("kernel-watchdog smoke: shard {}/{}: {} of {} notebooks{}\n",
                             options.shard->index, options.shard->count, notebook_paths.size(),
                             all_notebooks.size(),
                             durations.empty() ? " (by path)" : " (balanced by --durations)");
  std::vector<Planned> plan;
  std::set<std::string> names;
  for (const auto& path : notebook_paths) {
    try {
      Notebook nb = load_notebook(path);
      const std::string kernel = !options.kernel_name.empty() ? options.kernel_name
                                 : !nb.kernel_name.empty()    ? nb.kernel_name
                                                              : "python3";
      auto spec = kernelspec::find(kernel);
      if (!spec)
        throw NotebookError(path + ": no kernel named '" + kernel + "' (known: " + known_kernels() +
                            ")" +
                            (options.kernel_name.empty() ? "; choose one with --kernel" : ""));
      if (!spec->spec.contains("argv") || !spec->spec["argv"].is_array() ||
          spec->spec["argv"].empty())
        throw NotebookError(path + ": kernel '" + kernel + "' has no argv in " +
                            (spec->dir / "kernel.json").string());
      std::string executed = unique_output_name(nb.path, names);
      plan.push_back({std::move(nb), std::move(*spec), std::move(executed)});
    } catch (const NotebookError& e) {
      // Echoes bytes of the file (nlohmann quotes what it last read): made printable.
      std::cerr << "kernel-watchdog smoke: " << report::terminal_safe(e.what()) << "\n";
      return 4;
    } catch (const kernelspec::KernelspecError& e) {
      std::cerr << "kernel-watchdog smoke: " << report::terminal_safe(path + ": " + e.what())
                << "\n";
      return 4;
    }
  }
  for (const auto& p : plan)
    for (const auto& w : p.notebook.warnings)
      spdlog::warn("{}: {}", p.notebook.path.string(), w);

  try {
    util::SafeDir::open_private(options.output_dir);
    util::SafeDir::open(util::shared_temp_dir()).sweep_dead_owners(NotebookRun::kRunDirPrefix);
  } catch (const std::exception& e) {
    std::cerr << "kernel-watchdog smoke: --output-dir " << options.output_dir.string() << ": "
              << e.what() << "\n";
    return 4;
  }

  ::signal(SIGPIPE, SIG_IGN);
  loop::EventLoop loop;
  zmq::context_t zmq(1);
  const auto host_sources = std::make_shared<probes::HostSources>();
  loop::SignalPipe signals({SIGCHLD, SIGINT, SIGTERM, SIGHUP});
  std::vector<std::unique_ptr<NotebookRun>> runs;
  std::vector<NotebookResult> results(plan.size());
  std::size_t started = 0, printed = 0, finished = 0;
  int interrupted_by = 0;
  const bool progress = !options.json && ::isatty(STDERR_FILENO) != 0;
  const bool color =
      !options.json && ::isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr;
  std::ostream& lines = options.json ? std::cerr : std::cout;

  auto clear_progress = [&] {
    if (progress) std::cerr << "\r\x1b[K" << std::flush;
  };
  std::function<void()> start_more;
  auto on_done = [&] {
    ++finished;
    // Lines come out in the notebooks' order: a finished one waits for those before it.
    while (printed < runs.size() && runs[printed]->done()) {
      results[printed] = runs[printed]->result();
      clear_progress();
      lines << notebook_line(results[printed], color) << std::flush;
      ++printed;
    }
    if (finished == plan.size())
      loop.stop();
    else
      start_more();
  };
  start_more = [&] {
    const std::size_t jobs = static_cast<std::size_t>(std::max(1, options.jobs));
    while (started < plan.size() && started - finished < jobs) {
      Planned& p = plan[started++];
      runs.push_back(std::make_unique<NotebookRun>(loop, zmq, options, host_sources,
                                                   std::move(p.notebook), std::move(p.spec),
                                                   p.executed_name, on_done));
      runs.back()->start();
    }
  };
  loop.watch_fd(signals.fd(), [&] {
    for (int s : signals.drain()) {
      if (s == SIGCHLD) continue;
      interrupted_by = s;
      loop.stop();
    }
    for (auto& run : runs)
      run->check_death();
  });
  std::optional<loop::EventLoop::TimerId> ticker;
  if (progress)
    ticker = loop.every(std::chrono::seconds(1), [&] {
      for (const auto& run : runs)
        if (!run->done()) {
          std::cerr << "\r\x1b[K" << run->result().path.filename().string() << ": "
                    << run->progress() << std::flush;
          break;
        }
    });
  start_more();
  if (finished < plan.size() && !loop.run()) spdlog::error("event loop failed");
  clear_progress();
  if (interrupted_by != 0) {
    std::cerr << "kernel-watchdog smoke: interrupted; the running kernels were killed\n";
    runs.clear();  // kills what still runs, removes its connection files
    return 128 + interrupted_by;
  }

  for (const auto& r : results)
    if (r.outcome != Outcome::passed)
      lines << "\n" << report::terminal_safe(r.path.string()) << ":\n" << failure_details(r);
  const int status = exit_status(results);
  if (options.store_durations) {
    Durations measured;
    for (std::size_t i = 0; i < results.size(); ++i)
      measured[notebook_key(notebook_paths[i])] = results[i].seconds;
    try {
      store_durations(options.durations, measured);
    } catch (const std::exception& e) {
      spdlog::error("--store-durations {}: {}", options.durations.string(), e.what());
    }
  }
  if (options.json) std::cout << results_json(results).dump(2) << "\n";
  if (!options.junit.empty()) {
    try {
      util::write_file_atomically(std::filesystem::absolute(options.junit).parent_path(),
                                  options.junit.filename().string(), junit_xml(results), 0644);
    } catch (const std::exception& e) {
      spdlog::error("--junit {}: {}", options.junit.string(), e.what());
    }
  }
  if (const char* gha = std::getenv("GITHUB_ACTIONS");
      gha != nullptr && std::string(gha) == "true") {
    // Workflow commands are read from stdout and stderr alike; --json keeps stdout JSON.
    (options.json ? std::cerr : std::cout) << github_annotations(results) << std::flush;
    if (const char* summary = std::getenv("GITHUB_STEP_SUMMARY"); summary != nullptr && *summary)
      try {
        write_text_file(summary, github_step_summary(results), true);
      } catch (const std::exception& e) {
        spdlog::warn("$GITHUB_STEP_SUMMARY: {}", e.what());
      }
  }
  return status;
}

}  // namespace kwd::smoke
