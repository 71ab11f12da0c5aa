#include "kwd/daemon/unwatched_end.hpp"

#include <unistd.h>

#include "kwd/report/fallback_reports.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/timeline/timeline.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::daemon {
namespace {

using nlohmann::json;

// "20:01:02 UTC" when the same day as `other`, else the full date and time.
std::string when(std::int64_t ms, std::int64_t other) {
  const std::string at = util::iso8601_utc(ms);  // 2026-11-29T20:01:02.345Z
  const std::string day = at.substr(0, 10);
  const std::string time = at.substr(11, 8) + " UTC";
  return day == util::iso8601_utc(other).substr(0, 10) ? time : day + " " + time;
}

}  // namespace

json unwatched_end_report(const UnwatchedEnd& end, const std::string& id) {
  const WatchedEntry& k = end.kernel;
  const auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  json r;
  r["schema"] = report::kSchemaName;
  r["schema_version"] = report::kSchemaVersion;
  r["id"] = id;
  r["kind"] = "crash";
  r["watchdog"] = {
      {"version", KWD_VERSION},
      {"pid", ::getpid()},
      {"mode", "daemon"},
      {"unwatched_end",
       {{"watched_since_ms", k.watched_since_ms},
        {"last_watched_ms", end.last_watched_ms},
        {"found_ended_ms", end.found_ms},
        {"connection_file_present",
         end.connection_file_present ? json(*end.connection_file_present) : json(nullptr)}}}};
  const std::int64_t started = k.started_at_ms > 0 ? k.started_at_ms : k.watched_since_ms;
  r["kernel"] = {{"argv", k.argv},
                 {"pid", k.pid},
                 {"connection_file", or_null(k.connection_file)},
                 {"kernel_id", or_null(k.kernel_id)},
                 {"notebook", or_null(k.notebook)},
                 {"notebook_source", nullptr},
                 {"started_at", util::iso8601_utc(started)},
                 {"died_at", nullptr},
                 {"started_at_ms", started},
                 {"died_at_ms", nullptr}};
  const std::string between = "between " + when(end.last_watched_ms, end.found_ms) + " and " +
                              when(end.found_ms, end.found_ms);
  r["termination"] = {{"kind", "unknown"},
                      {"exit_code", nullptr},
                      {"signal", nullptr},
                      {"signal_name", nullptr},
                      {"core_dumped", false},
                      {"description", "ended while no daemon watched it (" + between + ")"},
                      {"returncode", nullptr},
                      {"status_source", "ended while unwatched: the daemon was not running"}};
  r["memory"] = {
      {"interval_ms", 0}, {"samples", timeline::samples_to_json({})}, {"peak", json::object()}};
  r["stderr_tail"] = nullptr;
  r["probes"] = json::array();
  r["notes"] =
      json::array({"the daemon that watched this kernel was not running when it ended "
                   "(killed, or ended by a fault of its own); what it had learnt of the "
                   "kernel went with it"});
  json evidence = json::array(
      {{{"fact", "the daemon watched it from " + when(k.watched_since_ms, end.found_ms) +
                     "; its last record is from " + when(end.last_watched_ms, end.found_ms) +
                     ", and it found the kernel gone when started again at " +
                     when(end.found_ms, end.found_ms)},
        {"pointer", "/watchdog/unwatched_end"}}});
  if (end.connection_file_present)
    evidence.push_back(
        {{"fact", *end.connection_file_present
                      ? "its connection file was still there: no manager cleaned up after it, as "
                        "one does after a shutdown it asked for"
                      : "its connection file was gone: its manager removed it, as after a "
                        "shutdown it asked for (or after it saw the kernel die)"},
         {"pointer", "/watchdog/unwatched_end/connection_file_present"}});
  r["diagnosis"] = {
      {"cause", "unknown"},
      {"headline", "Kernel ended while kernel-watchdog's daemon was not running (" + between +
                       "); how it ended is not known"},
      {"confidence", "low"},
      {"evidence", std::move(evidence)},
      {"remedies",
       json::array({{{"text",
                      "Keep the daemon running as a service that is restarted when it "
                      "ends: `kernel-watchdog service install`"},
                     {"why", "a kernel that dies while no daemon watches it gets no report"}}})},
      {"missing", json::array({"termination: the daemon was not running when the kernel ended, "
                               "so how it ended (exit status, signal) was not seen"})}};
  return r;
}

}  // namespace kwd::daemon
