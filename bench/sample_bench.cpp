// Times the watchdog's memory sample of a live process tree: the probes the watchdog runs
// (make_probes, as `run` makes them), called the way the sample tick calls them.
//
//   kwd-sample-bench PID [ITERATIONS [REALTIME_SECONDS]]
//
// Prints one JSON object: the median and p90 cost in microseconds of a steady-state tick
// (what happens 10 times a second: RSS of every member, cgroup usage, the kernel log
// drained) and of a full sample (tree rescanned from /proc, PSS and swap of every member,
// cgroup limits and events, meminfo and PSI re-read), plus how many processes it covered.
// Then it samples at the watchdog's default 10 Hz for REALTIME_SECONDS (default 10; after
// 5 s unmeasured, while every member is still a newcomer) with
// every probe at its own rate, as `run` does, and reports the CPU time that took per tick
// and per second: what watching this tree really costs.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "kwd/probes/linux/process_tree_probe.hpp"
#include "kwd/probes/probe.hpp"
#include "kwd/util/clock.hpp"

namespace {

struct Stats {
  double median_us;
  double p90_us;
};

Stats stats(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[us.size() * 9 / 10]};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PID [ITERATIONS]\n", argv[0]);
    return 2;
  }
  const pid_t pid = static_cast<pid_t>(std::atoi(argv[1]));
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 2000;
  const double realtime_s = argc > 3 ? std::atof(argv[3]) : 10.0;

  kwd::probes::ProbeOptions options;
  options.kernel_pid = pid;
  auto probes = kwd::probes::make_probes(options);
  auto* tree = dynamic_cast<kwd::probes::linux_proc::ProcessTreeProbe*>(probes.front().get());
  if (tree == nullptr || !tree->status().available) {
    std::fprintf(stderr, "cannot watch pid %d\n", pid);
    return 1;
  }
  const auto tick = [&] {
    kwd::timeline::MemorySample s;
    s.t_ms = kwd::util::wall_ms();
    const auto start = std::chrono::steady_clock::now();
    for (auto& p : probes)
      p->sample(s);
    const auto end = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(end - start).count();
  };
  // Warm up: the first sample scans /proc and reads everything.
  tick();
  tick();

  std::vector<double> steady, full;
  for (int i = 0; i < iterations; ++i)
    steady.push_back(tick());
  for (int i = 0; i < iterations; ++i) {
    tree->force_full_sample();
    full.push_back(tick());
  }
  // Where a steady tick's time goes, probe by probe.
  std::vector<std::vector<double>> per_probe(probes.size());
  for (int i = 0; i < iterations; ++i) {
    kwd::timeline::MemorySample sample;
    sample.t_ms = kwd::util::wall_ms();
    for (std::size_t k = 0; k < probes.size(); ++k) {
      const auto start = std::chrono::steady_clock::now();
      probes[k]->sample(sample);
      per_probe[k].push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count());
    }
  }
  std::string breakdown;
  for (std::size_t k = 0; k < probes.size(); ++k) {
    char item[128];
    std::snprintf(item, sizeof item, "%s\"%s\": %.2f", breakdown.empty() ? "" : ", ",
                  probes[k]->status().name.c_str(), stats(per_probe[k]).median_us);
    breakdown += item;
  }
  // Real time, default rates: the CPU this thread spends in the probes, tick after tick.
  const auto thread_cpu_ns = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
  };
  auto fresh = kwd::probes::make_probes(options);
  // Five seconds first, unmeasured: every member is a newcomer at first (PSS read at each
  // slow round), which a watchdog sees once per process, not in its steady state.
  for (int i = 0; i < 50; ++i) {
    kwd::timeline::MemorySample sample;
    sample.t_ms = kwd::util::wall_ms();
    for (auto& p : fresh)
      p->sample(sample);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const int ticks = static_cast<int>(realtime_s * 10);
  double realtime_cpu_ns = 0;
  std::vector<double> realtime_by_probe(fresh.size(), 0.0);
  for (int i = 0; i < ticks; ++i) {
    kwd::timeline::MemorySample sample;
    sample.t_ms = kwd::util::wall_ms();
    for (std::size_t k = 0; k < fresh.size(); ++k) {
      const double before = thread_cpu_ns();
      fresh[k]->sample(sample);
      const double spent = thread_cpu_ns() - before;
      realtime_by_probe[k] += spent;
      realtime_cpu_ns += spent;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::string realtime_breakdown;
  for (std::size_t k = 0; k < fresh.size(); ++k) {
    char item[128];
    std::snprintf(item, sizeof item, "%s\"%s\": %.1f", realtime_breakdown.empty() ? "" : ", ",
                  fresh[k]->status().name.c_str(), realtime_by_probe[k] / ticks / 1000.0);
    realtime_breakdown += item;
  }
  const double per_tick_us = realtime_cpu_ns / ticks / 1000.0;
  const double per_second_us = per_tick_us * 10.0;

  const auto s = stats(steady), f = stats(full);
  std::printf(
      "{\"processes\": %zu, \"iterations\": %d, \"steady_median_us\": %.2f, "
      "\"steady_p90_us\": %.2f, \"full_median_us\": %.2f, \"full_p90_us\": %.2f, "
      "\"steady_by_probe_us\": {%s}, \"realtime_seconds\": %.0f, "
      "\"realtime_cpu_per_tick_us\": %.2f, \"realtime_cpu_per_second_us\": %.1f, "
      "\"realtime_per_tick_by_probe_us\": {%s}}\n",
      tree->members().size(), iterations, s.median_us, s.p90_us, f.median_us, f.p90_us,
      breakdown.c_str(), realtime_s, per_tick_us, per_second_us, realtime_breakdown.c_str());
  return 0;
}
