#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kwd/report/report_store.hpp"
#include "kwd/util/private_files.hpp"
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

// Looks in a store for flight records left by watchdogs that are gone (their lock free)
// and reports their kernels: the daemon keeps one, with the store's directory open, and scans
// every 10 s. Never throws.
class FlightScanner {
 public:
  explicit FlightScanner(report::ReportStore store);
  ~FlightScanner();
  FlightScanner(const FlightScanner&) = delete;
  FlightScanner& operator=(const FlightScanner&) = delete;
  // How many kernels were reported.
  int scan() noexcept;

 private:
  report::ReportStore store_;
  std::optional<util::SafeDir> dir_;
};

// Once, as `run` does 5 s after its start: records whose watchdog is gone (its lock free,
// which also claims the record: two watchdogs never both report one), of this machine (an
// earlier boot's are removed unreported: those kernels ended with the machine; another
// machine's, in a shared home, are left alone), not ended on the manager's word, whose kernel
// is gone too where its pid can be asked (the same pid namespace); each kernel reported once
// (not again when its watchdog did report it). Returns how many were reported.
int report_orphaned_flights(const report::ReportStore& store) noexcept;

}  // namespace kwd::watch
