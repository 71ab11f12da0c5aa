#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kwd/report/report_store.hpp"
#include "kwd/watch/flight_evidence.hpp"
#include "kwd/watch/flight_record.hpp"

namespace kwd::watch {

// A kernel whose watchdog died with it, as the next watchdog found it: the record the dead
// one left, and what the machine still says of the end.
struct FlightEnd {
  FlightRecord record;
  std::int64_t found_ms = 0;
  // The kernel's memory cgroup's OOM-kill counter now: nullopt when the cgroup is gone (a
  // container's, removed with it) or has none.
  std::optional<std::int64_t> cgroup_oom_kills_now;
  KernelLogKills kernel_log;
};

// Its report: kind "crash", cause oom_killed_cgroup/oom_killed_system when the kernel log or the
// cgroup's counter says the OOM killer fired, else unknown; the last cell and memory the record
// held; nothing guessed.
nlohmann::json flight_end_report(const FlightEnd& end, const std::string& id);

// Looks in `store` for flight records left by watchdogs that are gone (the same boot; an
// earlier boot's are removed unreported: those kernels ended with the machine) whose kernels
// are gone too, and reports each kernel once (a record is claimed by renaming it, so two
// watchdogs starting together never both report it; a kernel whose death its watchdog did
// report is not reported again). Returns how many were reported. Never throws.
int report_orphaned_flights(const report::ReportStore& store) noexcept;

}  // namespace kwd::watch
