#include "kwd/watch/flight_end.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "kwd/platform/host.hpp"
#include "kwd/platform/regular_file.hpp"
#include "kwd/probes/process_record.hpp"
#include "kwd/report/fallback_reports.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/timeline/timeline.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::watch {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxFlightRecordBytes = 64 * 1024;

json or_null(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

// "1.9 GiB of 2.0 GiB (cgroup limit)", or "" when the record holds no such reading.
std::string memory_in_words(const FlightRecord& r) {
  if (r.cgroup_limit > 0 && (r.cgroup_usage >= 0 || r.rss >= 0))
    return util::format_bytes(r.cgroup_usage >= 0 ? r.cgroup_usage : r.rss) + " of its cgroup's " +
           util::format_bytes(r.cgroup_limit);
  if (r.rss >= 0 && r.mem_total > 0)
    return util::format_bytes(r.rss) + " of the machine's " + util::format_bytes(r.mem_total);
  if (r.rss >= 0) return util::format_bytes(r.rss);
  return {};
}

std::string cell_in_words(const FlightRecord& r) {
  if (r.cell_execution_count > 0) return "cell [" + std::to_string(r.cell_execution_count) + "]";
  if (r.cell_started_at_ms > 0) return "a cell";
  return {};
}

timeline::MemorySample sample_of(const FlightRecord& r) {
  timeline::MemorySample s;
  s.t_ms = r.sampled_at_ms;
  s.rss = r.rss;
  s.cgroup_usage = r.cgroup_usage;
  s.cgroup_limit = r.cgroup_limit;
  s.mem_total = r.mem_total;
  s.gpu_used = r.gpu_used;
  return s;
}

bool same_process(pid_t pid, std::uint64_t start_time) {
  const auto record = probes::ProcessRecord::open(pid);
  const auto lineage = record ? record->lineage() : std::nullopt;
  return lineage && lineage->start_time == start_time;
}

}  // namespace

json flight_end_report(const FlightEnd& end, const std::string& id) {
  const FlightRecord& k = end.record;
  const bool counter_rose = end.cgroup_oom_kills_now && k.cgroup_oom_kills &&
                            *end.cgroup_oom_kills_now > *k.cgroup_oom_kills;
  const LoggedKill* kernel_kill = nullptr;
  const LoggedKill* watchdog_kill = nullptr;
  for (const auto& kill : end.kernel_log.kills) {
    if (kill.pid == k.kernel_pid && kernel_kill == nullptr) kernel_kill = &kill;
    if (kill.pid == k.watchdog_pid && watchdog_kill == nullptr) watchdog_kill = &kill;
  }
  const bool oom = counter_rose || kernel_kill != nullptr || watchdog_kill != nullptr;
  const bool in_cgroup = k.cgroup_limit > 0;
  const std::string memory = memory_in_words(k);
  const std::string cell = cell_in_words(k);
  const std::string last_seen = util::iso8601_utc(k.written_at_ms);

  json r;
  r["schema"] = report::kSchemaName;
  r["schema_version"] = report::kSchemaVersion;
  r["id"] = id;
  r["kind"] = "crash";
  r["watchdog"] = {
      {"version", KWD_VERSION},
      {"pid", ::getpid()},
      {"mode", "launcher"},
      {"flight_record",
       {{"watchdog_pid", k.watchdog_pid},
        {"written_at_ms", k.written_at_ms},
        {"found_ended_ms", end.found_ms},
        {"state", or_null(k.state)},
        {"memory_cgroup", or_null(k.memory_cgroup_dir)},
        {"cgroup_oom_kills_then", k.cgroup_oom_kills ? json(*k.cgroup_oom_kills) : json(nullptr)},
        {"cgroup_oom_kills_now",
         end.cgroup_oom_kills_now ? json(*end.cgroup_oom_kills_now) : json(nullptr)},
        {"kernel_log_readable", end.kernel_log.readable}}}};
  const std::int64_t died_ms = kernel_kill ? kernel_kill->at_ms : -1;
  r["kernel"] = {{"argv", k.argv},
                 {"pid", k.kernel_pid},
                 {"connection_file", or_null(k.connection_file)},
                 {"kernel_id", or_null(k.kernel_id)},
                 {"notebook", or_null(k.notebook)},
                 {"notebook_source", nullptr},
                 {"started_at", util::iso8601_utc(k.kernel_started_at_ms)},
                 {"died_at", died_ms > 0 ? json(util::iso8601_utc(died_ms)) : json(nullptr)},
                 {"started_at_ms", k.kernel_started_at_ms},
                 {"died_at_ms", died_ms > 0 ? json(died_ms) : json(nullptr)}};
  if (kernel_kill != nullptr) {
    r["termination"] = {{"kind", "signal"},
                        {"exit_code", nullptr},
                        {"signal", 9},
                        {"signal_name", "SIGKILL"},
                        {"core_dumped", false},
                        {"description", "killed by the OOM killer (SIGKILL), with its watchdog"},
                        {"returncode", -9},
                        {"status_source", "the kernel log's OOM-killer line"}};
  } else {
    r["termination"] = {
        {"kind", "unknown"},
        {"exit_code", nullptr},
        {"signal", nullptr},
        {"signal_name", nullptr},
        {"core_dumped", false},
        {"description", "ended together with its watchdog, which was not left to see how"},
        {"returncode", nullptr},
        {"status_source", "its watchdog's flight record: the watchdog died with it"}};
  }
  std::vector<timeline::MemorySample> samples;
  if (k.sampled_at_ms > 0) samples.push_back(sample_of(k));
  r["memory"] = {{"interval_ms", 0},
                 {"samples", timeline::samples_to_json(samples)},
                 {"peak", json::object()}};
  json in_flight = nullptr;
  if (k.cell_execution_count > 0 || k.cell_started_at_ms > 0)
    in_flight = {
        {"execution_count", k.cell_execution_count},
        {"code", k.cell_code},
        {"started_at_ms", k.cell_started_at_ms},
        {"ended_at_ms", nullptr},
        // as of the last record: how long it ran after that is not known
        {"running_for_s", static_cast<double>(k.written_at_ms - k.cell_started_at_ms) / 1000.0},
        {"status", "unknown"}};
  r["execution"] = {{"state_at_death", or_null(k.state)},
                    {"shutdown_requested", false},
                    {"cell_in_flight", std::move(in_flight)},
                    {"last_cells", json::array()},
                    {"last_error", nullptr},
                    {"stream_stderr_tail", ""}};
  r["stderr_tail"] = nullptr;
  r["probes"] = json::array();
  r["notes"] = json::array(
      {"written by another watchdog from the flight record of the one that watched this "
       "kernel: that watchdog died with the kernel (its whole cgroup killed, as "
       "memory.oom.group or a container's stop does), so nothing after " +
       last_seen + " was seen"});

  json evidence = json::array();
  std::string seen = "its watchdog's last record (" + last_seen + ")";
  if (!cell.empty()) seen += ": " + cell + " was running";
  if (!memory.empty()) seen += (cell.empty() ? ": " : ", at ") + memory;
  evidence.push_back({{"fact", seen}, {"pointer", "/watchdog/flight_record"}});
  if (kernel_kill != nullptr)
    evidence.push_back(
        {{"fact",
          "the kernel log says the OOM killer killed the kernel (pid " +
              std::to_string(k.kernel_pid) + ") at " + util::iso8601_utc(kernel_kill->at_ms) +
              (kernel_kill->rss_bytes ? ", holding " + util::format_bytes(*kernel_kill->rss_bytes)
                                      : std::string())},
         {"pointer", "/termination/status_source"}});
  if (watchdog_kill != nullptr)
    evidence.push_back({{"fact", "the kernel log says the OOM killer killed its watchdog (pid " +
                                     std::to_string(k.watchdog_pid) + ") at " +
                                     util::iso8601_utc(watchdog_kill->at_ms)},
                        {"pointer", "/watchdog/flight_record/watchdog_pid"}});
  if (counter_rose)
    evidence.push_back(
        {{"fact",
          "the OOM killer fired in the kernel's memory cgroup since that record: its "
          "oom_kill counter went from " +
              std::to_string(*k.cgroup_oom_kills) + " to " +
              std::to_string(*end.cgroup_oom_kills_now)},
         {"pointer", "/watchdog/flight_record/cgroup_oom_kills_now"}});

  json missing = json::array();
  if (kernel_kill == nullptr)
    missing.push_back(
        "termination: the watchdog died with the kernel, so how the kernel ended (exit status, "
        "signal) was not seen");
  if (!end.kernel_log.readable)
    missing.push_back("kernel log: " + (end.kernel_log.why_not.empty() ? std::string("not read")
                                                                       : end.kernel_log.why_not));
  if (!k.memory_cgroup_dir.empty() && !end.cgroup_oom_kills_now)
    missing.push_back("memory cgroup " + k.memory_cgroup_dir +
                      ": gone, or its OOM-kill counter not readable, when the kernel was found "
                      "ended");
  missing.push_back("the memory samples after " + last_seen +
                    ", the stderr tail and the stacks: "
                    "they went with the watchdog");

  const std::string where = cell.empty() ? std::string() : ", while " + cell + " ran";
  const std::string at = memory.empty() ? std::string() : " at " + memory;
  json diagnosis;
  if (oom) {
    diagnosis = {
        {"cause", in_cgroup ? "oom_killed_cgroup" : "oom_killed_system"},
        {"headline", std::string("Killed by the OOM killer together with its watchdog") +
                         (in_cgroup ? " (their whole cgroup)" : "") + at + where},
        {"confidence", kernel_kill != nullptr ? "high" : "medium"},
        {"remedies",
         json::array(
             {{{"text", in_cgroup ? "Give the container (or its cgroup) more memory, or make "
                                    "the cell use less: load data in chunks, free large "
                                    "objects with `del` before the next ones"
                                  : "Make the cell use less memory, or run it on a machine "
                                    "with more"},
               {"why", "the kernel reached its memory limit" + where}},
              {{"text",
                "Run kernel-watchdog outside the cgroup it watches (the node daemon, "
                "`kernel-watchdog daemon`), or in a cgroup without memory.oom.group"},
               {"why", "a watchdog killed with the kernel sees nothing after its last record"}}})}};
  } else {
    diagnosis = {
        {"cause", "unknown"},
        {"headline",
         "Kernel ended together with its watchdog; how is not known (last seen" + at + where + ")"},
        {"confidence", "low"},
        {"remedies",
         json::array({{{"text",
                        "Look at what stopped or killed the container or its cgroup "
                        "(`kubectl describe pod`, `docker inspect`, the system log)"},
                       {"why",
                        "both processes ended at once, which a whole cgroup's kill or a "
                        "container's stop does"}}})}};
  }
  diagnosis["evidence"] = std::move(evidence);
  diagnosis["missing"] = std::move(missing);
  r["diagnosis"] = std::move(diagnosis);
  return r;
}

int report_orphaned_flights(const report::ReportStore& store) noexcept {
  int reported = 0;
  try {
    std::error_code ec;
    if (!std::filesystem::is_directory(store.dir(), ec)) return 0;
    const auto dir = util::SafeDir::open(store.dir());
    std::vector<std::string> names;
    {
      const int listing = ::openat(dir.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (listing < 0) return 0;
      const std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(listing), ::closedir);
      if (!d) {
        ::close(listing);
        return 0;
      }
      while (const dirent* e = ::readdir(d.get())) {
        const std::string_view name = e->d_name;
        if (name.starts_with(kFlightRecordPrefix) &&
            name.find(".claimed") == std::string_view::npos)
          names.emplace_back(name);
      }
    }
    const std::string boot = platform::boot_id();
    for (const auto& name : names) {
      auto file = platform::open_regular_file(dir.fd(), name.c_str(), O_NOFOLLOW);
      if (!file.fd || file.st.st_uid != ::geteuid()) continue;
      const auto text = platform::read_up_to(file.fd.get(), kMaxFlightRecordBytes);
      const auto record = text ? parse_flight_record(*text) : std::nullopt;
      if (!record) continue;
      if (record->watchdog_pid == ::getpid()) continue;
      if (!boot.empty() && !record->boot_id.empty() && boot != record->boot_id) {
        ::unlinkat(dir.fd(), name.c_str(), 0);  // ended with the machine
        continue;
      }
      if (same_process(record->watchdog_pid, record->watchdog_start_time)) continue;
      // The watchdog alone was killed: the kernel lives on unwatched; looked at again later.
      if (same_process(record->kernel_pid, record->kernel_start_time)) continue;
      const std::string claimed = name + ".claimed-" + std::to_string(::getpid());
      if (::renameat(dir.fd(), name.c_str(), dir.fd(), claimed.c_str()) != 0) continue;
      if (report::holds_death_report(store, record->kernel_id, record->kernel_pid,
                                     record->kernel_started_at_ms)) {
        ::unlinkat(dir.fd(), claimed.c_str(), 0);
        continue;
      }
      FlightEnd end{*record, util::wall_ms(),
                    cgroup_oom_kills(record->memory_cgroup_dir, record->memory_cgroup_version),
                    oom_kills_in_kernel_log({record->kernel_pid, record->watchdog_pid},
                                            record->kernel_started_at_ms)};
      const std::string id =
          report::make_report_id(record->written_at_ms, record->kernel_id, record->kernel_pid);
      auto doc = flight_end_report(end, id);
      try {
        const auto path = store.write(id, report::to_text(doc));
        spdlog::warn(
            "kernel {} (pid {}) died together with its watchdog (pid {}); reported "
            "from its flight record: {}",
            record->kernel_id.empty() ? "?" : record->kernel_id, record->kernel_pid,
            record->watchdog_pid, path.string());
      } catch (const std::exception& e) {
        doc["notes"].push_back(std::string("report directory unusable: ") + e.what());
        doc[report::kStoredInsteadOf] = report::store_key(store.dir());
        std::filesystem::path path;
        try {
          path = report::ReportStore(report::ReportStore::fallback_dir())
                     .write(id, report::to_text(doc));
        } catch (const std::exception& again) {
          // Nowhere to write: the record goes back, for the next look.
          ::renameat(dir.fd(), claimed.c_str(), dir.fd(), name.c_str());
          spdlog::warn(
              "kernel pid {} died together with its watchdog; no report could be "
              "written ({}), tried again later",
              record->kernel_pid, again.what());
          continue;
        }
        spdlog::warn(
            "kernel pid {} died together with its watchdog; its report is in {} (the "
            "store refused it: {})",
            record->kernel_pid, path.string(), e.what());
      }
      ::unlinkat(dir.fd(), claimed.c_str(), 0);
      ++reported;
    }
  } catch (const std::exception& e) {
    spdlog::warn("flight records not looked at: {}", e.what());
  } catch (...) {
  }
  return reported;
}

}  // namespace kwd::watch
