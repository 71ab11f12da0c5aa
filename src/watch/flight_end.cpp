#include "kwd/watch/flight_end.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
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

// Whether the process still runs. Only its absence counts as gone: a process that cannot be
// read (a descriptor limit, hidepid) may well live.
bool may_be_running(pid_t pid, std::uint64_t start_time) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  const auto started = probes::start_time_of(pid);
  return !started || *started == start_time;
}

// The cgroup's share of its limit at the record, in percent (-1 without one).
int cgroup_percent(const FlightRecord& r) {
  if (r.cgroup_limit <= 0) return -1;
  const std::int64_t used = r.cgroup_usage >= 0 ? r.cgroup_usage : r.rss;
  return used < 0 ? -1 : static_cast<int>(used * 100 / r.cgroup_limit);
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
  const bool proven = counter_rose || kernel_kill != nullptr || watchdog_kill != nullptr;
  // A restarted container keeps neither its cgroup nor a kernel log it may read: what is left
  // is the record's own reading. Both ended together at the brink of the cgroup's limit is
  // what a whole-cgroup OOM kill leaves, said as likely, not as proven.
  const int percent = cgroup_percent(k);
  const bool at_the_brink = !proven && percent >= 95;
  const bool oom = proven || at_the_brink;
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
      {"pid", k.watchdog_pid},
      {"mode", "launcher"},
      {"flight_record",
       {{"watchdog_pid", k.watchdog_pid},
        {"reported_by_pid", ::getpid()},
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
    in_flight = {{"execution_count", k.cell_execution_count},
                 {"code", k.cell_code},
                 {"started_at_ms", k.cell_started_at_ms},
                 {"ended_at_ms", nullptr},
                 // as of the last record: how long it ran after that is not known
                 {"running_for_s",
                  k.cell_started_at_ms > 0
                      ? json(static_cast<double>(k.written_at_ms - k.cell_started_at_ms) / 1000.0)
                      : json(nullptr)},
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
  if (at_the_brink)
    evidence.push_back(
        {{"fact", "its last record had the kernel's cgroup at " + std::to_string(percent) +
                      " % of its limit, and the kernel and its watchdog ended together, as a "
                      "whole cgroup's OOM kill ends them"},
         {"pointer", "/memory/samples"}});
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
  if (at_the_brink)
    missing.push_back(
        "the OOM killer's own record: neither the kernel log nor the cgroup's "
        "OOM-kill counter could be read for it (a restarted container keeps "
        "neither), so the cause is inferred from the last reading");
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
        {"headline", std::string(at_the_brink ? "Most likely killed" : "Killed") +
                         " by the OOM killer together with its watchdog" +
                         (in_cgroup ? " (their whole cgroup)" : "") + at + where},
        {"confidence", kernel_kill != nullptr ? "high"
                       : at_the_brink         ? "low"
                                              : "medium"},
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
                        "(`kubectl describe pod`, `docker inspect`, the system log), or whether "
                        "its manager killed it after a restart or shutdown it did not answer"},
                       {"why",
                        "both processes ended at once, which a whole cgroup's kill, a "
                        "container's stop and a kernel manager's kill of the process group all "
                        "do"}}})}};
  }
  diagnosis["evidence"] = std::move(evidence);
  diagnosis["missing"] = std::move(missing);
  r["diagnosis"] = std::move(diagnosis);
  return r;
}

namespace {

// The record `name` in `dir`, whose lock this process now holds; nullopt when it is not one.
std::optional<FlightRecord> read_record(const util::SafeDir& dir, const std::string& name) {
  auto file = platform::open_regular_file(dir.fd(), name.c_str(), O_NOFOLLOW);
  if (!file.fd || file.st.st_uid != ::geteuid()) return std::nullopt;
  const auto text = platform::read_up_to(file.fd.get(), kMaxFlightRecordBytes);
  return text ? parse_flight_record(*text) : std::nullopt;
}

void forget(const util::SafeDir& dir, const std::string& name) {
  ::unlinkat(dir.fd(), name.c_str(), 0);
  ::unlinkat(dir.fd(), (name + std::string(kFlightLockSuffix)).c_str(), 0);
}

// Stored as a report is, or in the fallback location when the store refuses it; false when
// neither took it.
bool store_report(const report::ReportStore& store, const FlightRecord& record,
                  const std::string& id, nlohmann::json doc) {
  const auto written = report::write_or_fall_back(store, id, doc);
  if (written.path && !written.in_fallback) {
    spdlog::warn(
        "kernel {} (pid {}) died together with its watchdog (pid {}); reported from its "
        "flight record: {}",
        record.kernel_id.empty() ? "?" : record.kernel_id, record.kernel_pid, record.watchdog_pid,
        written.path->string());
  } else if (written.path) {
    spdlog::warn(
        "kernel pid {} died together with its watchdog; its report is in {} (the store refused "
        "it: {})",
        record.kernel_pid, written.path->string(), written.refused);
  } else {
    spdlog::warn(
        "kernel pid {} died together with its watchdog; no report could be written ({}): "
        "tried again later",
        record.kernel_pid, written.fallback_refused);
  }
  return written.path.has_value();
}

constexpr std::int64_t kForeignRecordMaxAgeMs = 30ll * 24 * 3600 * 1000;

}  // namespace

FlightScanner::FlightScanner(report::ReportStore store) : store_(std::move(store)) {}

FlightScanner::~FlightScanner() = default;

int FlightScanner::scan() noexcept {
  int reported = 0;
  try {
    if (!dir_) {
      std::error_code ec;
      if (!std::filesystem::is_directory(store_.dir(), ec)) return 0;
      dir_.emplace(util::SafeDir::open(store_.dir()));
    }
    const util::SafeDir& dir = *dir_;
    std::vector<std::string> names;
    {
      const int listing = ::openat(dir.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (listing < 0) {
        dir_.reset();  // removed meanwhile: opened again next time
        return 0;
      }
      const std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(listing), ::closedir);
      if (!d) {
        ::close(listing);
        return 0;
      }
      while (const dirent* e = ::readdir(d.get())) {
        const std::string_view name = e->d_name;
        if (name.starts_with(kFlightRecordPrefix) && !name.ends_with(kFlightLockSuffix))
          names.emplace_back(name);
      }
    }
    const std::string boot = platform::boot_id();
    const std::uint64_t pid_namespace = own_pid_namespace();
    for (const auto& name : names) {
      // The watchdog holds its record's lock for its life: a lock we can take is a watchdog
      // gone, in whatever container. Taken, it is also our claim: no two report one record.
      const std::string lock_name = name + std::string(kFlightLockSuffix);
      const util::UniqueFd lock(
          ::openat(dir.fd(), lock_name.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
      if (!lock) continue;  // no lock: the record is being made or removed
      if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;
      const auto record = read_record(dir, name);
      if (!record) continue;  // gone meanwhile (another claimed and reported it), or damaged
      const std::int64_t now = util::wall_ms();
      if (!record->host.empty() && record->host != this_host()) {
        // Another machine's, in a shared home: not ours to judge; forgotten when stale.
        if (now - record->written_at_ms > kForeignRecordMaxAgeMs) forget(dir, name);
        continue;
      }
      if (!boot.empty() && !record->boot_id.empty() && boot != record->boot_id) {
        forget(dir, name);  // its kernel ended with the machine
        continue;
      }
      if (record->end_requested) {
        forget(dir, name);  // ended on its manager's word: no death to report
        continue;
      }
      // In our pid namespace the kernel's pid means something: a kernel that outlived its
      // watchdog runs on unwatched (looked at again later). In another one (a container's,
      // gone with it) it cannot be asked.
      if (record->pid_namespace == pid_namespace &&
          may_be_running(record->kernel_pid, record->kernel_start_time))
        continue;
      if (report::holds_death_report(store_, record->kernel_id, record->kernel_pid,
                                     record->kernel_started_at_ms)) {
        forget(dir, name);
        continue;
      }
      FlightEnd end{*record,
                    now,
                    cgroup_oom_kills(record->memory_cgroup_dir, record->memory_cgroup_inode,
                                     record->memory_cgroup_version),
                    {}};
      // The kernel log's pids are the initial namespace's.
      if (record->pid_namespace == kInitialPidNamespace)
        end.kernel_log = oom_kills_in_kernel_log({record->kernel_pid, record->watchdog_pid},
                                                 record->kernel_started_at_ms);
      else
        end.kernel_log.why_not =
            "its pids are a container's (another pid namespace), not the kernel log's";
      const std::string id =
          report::make_report_id(record->written_at_ms, record->kernel_id, record->kernel_pid);
      if (!store_report(store_, *record, id, flight_end_report(end, id))) continue;
      forget(dir, name);
      ++reported;
    }
  } catch (const std::exception& e) {
    spdlog::debug("flight records not looked at: {}", e.what());
  } catch (...) {
  }
  return reported;
}

int report_orphaned_flights(const report::ReportStore& store) noexcept {
  try {
    return FlightScanner(store).scan();
  } catch (...) {
    return 0;
  }
}

}  // namespace kwd::watch
