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
#include <thread>

#include "kwd/loop/event_loop.hpp"
#include "kwd/loop/signal_pipe.hpp"
#include "kwd/platform/memory_room.hpp"
#include "kwd/probes/host_sources.hpp"
#include "kwd/report/terminal_text.hpp"
#include "kwd/smoke/gpu_placement.hpp"
#include "kwd/smoke/history.hpp"
#include "kwd/smoke/notebook_run.hpp"
#include "kwd/smoke/resource_spec.hpp"
#include "kwd/smoke/result_writers.hpp"
#include "kwd/smoke/sharding.hpp"
#include "kwd/smoke/suite_schedule.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/util/size_parse.hpp"

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

// -j auto: what the kernels may hold together. The room smoke runs in, less what is in use
// there now (smoke itself among it) and a margin for what sampling every 100 ms cannot see
// coming: a kernel can allocate a lot between two samples.
std::optional<std::int64_t> memory_budget() {
  std::string problem;
  const auto room = platform::memory_room(problem);
  if (!room) {
    std::cerr << "kernel-watchdog smoke: -j auto: cannot tell how much memory the kernels may "
                 "use ("
              << problem << "); give -j N instead\n";
    return std::nullopt;
  }
  const std::int64_t margin = std::max<std::int64_t>(room->limit / 10, std::int64_t{128} << 20);
  const std::int64_t budget = std::max<std::int64_t>(room->limit - room->in_use - margin, 0);
  std::cerr << fmt::format(
      "kernel-watchdog smoke: -j auto: {} for the kernels: {} of {}, less {} in use and a {} "
      "margin\n",
      util::format_bytes(budget), util::format_bytes(room->limit), room->source,
      util::format_bytes(room->in_use), util::format_bytes(margin));
  return budget;
}

// -j auto with GPUs: each kernel is handed one, where its GPU memory fits.
std::vector<SmokeGpu> gpus_to_place_on(const SmokeOptions& options) {
  std::string said;
  auto gpus = usable_gpus(options.nvml_library, said);
  if (gpus.empty()) {
    std::cerr << "kernel-watchdog smoke: -j auto: no GPU placement (" << report::terminal_safe(said)
              << ")\n";
    return gpus;
  }
  std::string line = "kernel-watchdog smoke: -j auto: GPUs (free less a CUDA context's " +
                     util::format_bytes(kCudaContextReserve) + "):";
  for (const auto& gpu : gpus)
    line += " " + gpu.uuid + " (" + gpu.name + ") " + util::format_bytes(gpu.budget) +
            (&gpu == &gpus.back() ? "" : ";");
  std::cerr << report::terminal_safe(line) << "\n";
  return gpus;
}

Job job_of(std::size_t index, const Notebook& notebook, const History& history,
           const Durations& durations) {
  Job job;
  job.index = index;
  job.name = notebook.path.string();
  const auto key = notebook_key(notebook.path);
  const auto found = history.find(key);
  if (found != history.end() && found->second.peak_rss)
    job.estimate = found->second.peak_rss;
  else
    job.estimate = notebook.declared_peak_rss;
  if (found != history.end()) job.gpu_estimate = found->second.peak_gpu;
  const auto timed = durations.find(key);
  job.seconds = timed != durations.end() ? timed->second : mean_seconds(durations);
  return job;
}

void say_the_plan(const std::vector<SuiteSchedule::Entry>& entries, std::int64_t budget,
                  std::size_t ceiling, const std::vector<SmokeGpu>& gpus, bool durations_known) {
  std::vector<Job> jobs;
  std::size_t unknown = 0;
  for (const auto& entry : entries) {
    jobs.push_back(entry.job);
    if (!entry.job.estimate) {
      ++unknown;
    } else if (*entry.job.estimate > budget) {
      std::cerr << "kernel-watchdog smoke: warning: " << report::terminal_safe(entry.job.name)
                << " peaked at " << util::format_bytes(*entry.job.estimate)
                << ", more than the whole budget: it runs alone, and may still be OOM-killed\n";
    }
  }
  std::string line = fmt::format(
      "kernel-watchdog smoke: {} notebooks, at most {} at once: {} "
      "of known peak, {} never seen",
      entries.size(), ceiling, entries.size() - unknown, unknown);
  if (unknown > 0) line += " (they start first, one at a time until their memory is seen)";
  if (durations_known && unknown < entries.size()) {
    const auto prediction = predict(jobs, budget, ceiling, gpus);
    line += fmt::format("; predicted {:.0f} s, against a lower bound of {:.0f} s",
                        prediction.seconds, prediction.lower_bound);
  }
  std::cerr << line << "\n";
}

}  // namespace

int run_smoke(const SmokeOptions& options, const std::vector<std::string>& all_notebooks) {
  // Everything that can be known wrong is known before any kernel starts.
  History history;
  try {
    if (!options.durations.empty()) history = load_history(options.durations);
  } catch (const std::exception& e) {
    std::cerr << "kernel-watchdog smoke: --durations " << report::terminal_safe(e.what()) << "\n";
    return 4;
  }
  const Durations durations = durations_of(history);
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

  std::optional<std::int64_t> budget;
  std::vector<SmokeGpu> gpus;
  if (!options.resource_spec_file.empty()) {
    try {
      gpus = read_resource_spec(options.resource_spec_file);
    } catch (const std::exception& e) {
      std::cerr << "kernel-watchdog smoke: --resource-spec-file " << report::terminal_safe(e.what())
                << "\n";
      return 4;
    }
    std::string line = "kernel-watchdog smoke: GPUs of the resource spec, one slot a notebook:";
    for (const auto& gpu : gpus)
      line += " id " + gpu.ctest_id + " (" + std::to_string(gpu.slots) + " slot" +
              (gpu.slots == 1 ? "" : "s") + ")" + (&gpu == &gpus.back() ? "" : ";");
    std::cerr << report::terminal_safe(line) << "\n";
  }
  if (options.memory_aware) {
    budget = memory_budget();
    if (!budget) return 4;
    if (gpus.empty()) gpus = gpus_to_place_on(options);
  }
  std::size_t ceiling = static_cast<std::size_t>(std::max(1, options.jobs));
  if (options.jobs_auto) ceiling = std::max(2U, std::thread::hardware_concurrency());
  std::vector<SuiteSchedule::Entry> entries;
  entries.reserve(plan.size());
  for (std::size_t i = 0; i < plan.size(); ++i) {
    SuiteSchedule::Entry entry{
        std::move(plan[i].notebook), std::move(plan[i].spec), std::move(plan[i].executed_name), {}};
    entry.job = job_of(i, entry.notebook, history, durations);
    entries.push_back(std::move(entry));
  }
  if (budget) say_the_plan(entries, *budget, ceiling, gpus, !durations.empty());

  ::signal(SIGPIPE, SIG_IGN);
  loop::EventLoop loop;
  zmq::context_t zmq(1);
  const auto host_sources = std::make_shared<probes::HostSources>();
  loop::SignalPipe signals({SIGCHLD, SIGINT, SIGTERM, SIGHUP});
  int interrupted_by = 0;
  const bool progress = !options.json && ::isatty(STDERR_FILENO) != 0;
  const bool color =
      !options.json && ::isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr;
  std::ostream& lines = options.json ? std::cerr : std::cout;

  auto clear_progress = [&] {
    if (progress) std::cerr << "\r\x1b[K" << std::flush;
  };
  const bool any = !entries.empty();
  SuiteSchedule schedule(
      loop, zmq, options, host_sources, std::move(entries), budget, ceiling, std::move(gpus),
      [&](const NotebookResult& result) {
        // Lines come out in the notebooks' order: a finished one waits for those before it.
        clear_progress();
        lines << notebook_line(result, color) << std::flush;
      },
      [&] { loop.stop(); });
  loop.watch_fd(signals.fd(), [&] {
    for (int s : signals.drain()) {
      if (s == SIGCHLD) continue;
      interrupted_by = s;
      loop.stop();
    }
    schedule.check_death();
  });
  std::optional<loop::EventLoop::TimerId> ticker;
  if (progress)
    ticker = loop.every(std::chrono::seconds(1), [&] {
      if (const auto* run = schedule.first_running())
        std::cerr << "\r\x1b[K" << run->result().path.filename().string() << ": " << run->progress()
                  << std::flush;
    });
  schedule.start();
  if (any && !loop.run()) spdlog::error("event loop failed");
  clear_progress();
  if (interrupted_by != 0) {
    std::cerr << "kernel-watchdog smoke: interrupted; the running kernels were killed\n";
    return 128 + interrupted_by;  // the schedule's end kills what still runs
  }
  const std::vector<NotebookResult> results = schedule.results();
  if (budget) lines << scheduling_table(results);

  for (const auto& r : results)
    if (r.outcome != Outcome::passed)
      lines << "\n" << report::terminal_safe(r.path.string()) << ":\n" << failure_details(r);
  const int status = exit_status(results);
  if (options.store_durations) {
    History measured;
    for (std::size_t i = 0; i < results.size(); ++i)
      measured[notebook_key(notebook_paths[i])] = {results[i].seconds, results[i].peak_rss,
                                                   results[i].peak_gpu,
                                                   results[i].outcome != Outcome::passed};
    try {
      store_history(options.durations, measured);
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
