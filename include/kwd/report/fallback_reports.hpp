#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kwd/report/report_store.hpp"

namespace kwd::report {

// A report its store could not take (full, read-only, deleted) goes to the fallback location
// (ReportStore::fallback_dir) with "stored_instead_of" naming the store it was meant for. It
// stays findable there (`reports list` reads both places) and moves into its store once the
// store takes writes again.
inline constexpr const char* kStoredInsteadOf = "stored_instead_of";

// Where a report went: its store, or, the store refusing it, the fallback location.
struct WriteOutcome {
  std::optional<std::filesystem::path> path;  // nullopt: neither could take it
  bool in_fallback = false;
  std::string refused;           // why the store did not take it ("" when it did)
  std::string fallback_refused;  // why the fallback location did not either
};

// Writes `doc` as report `id` into `store`. A store that refuses it is named in the report
// (its notes, and "stored_instead_of" so that it finds its way home), and the report goes to
// the fallback location, capped by `fallback_limits`. What every writer of reports does: the
// watch's, the flight records', the daemon's records of ends it did not see. Never throws.
WriteOutcome write_or_fall_back(const ReportStore& store, const std::string& id,
                                nlohmann::json& doc, const StoreLimits& fallback_limits = {});

// What a store is known by in "stored_instead_of": its absolute path, normalised, with no
// trailing slash ("reports/" and "./reports" from the same place are the same store).
std::string store_key(const std::filesystem::path& dir);

// The stores that fallback reports wait for (their store_key), each once.
std::vector<std::string> stores_waited_for(
    const std::filesystem::path& fallback_dir = ReportStore::fallback_dir());

// The fallback location's reports meant for `store`, newest first. Nothing when the fallback
// is missing, is the store itself, or is not safely ours (another user's directory in /tmp).
std::vector<StoredReport> fallback_reports_for(
    const ReportStore& store,
    const std::filesystem::path& fallback_dir = ReportStore::fallback_dir());

// Whether `store`, or the fallback location for it, holds a death report of the kernel
// process `kernel_pid` (a hang report does not count) written at or after `since_ms`: pids are
// reused, a report from before the process started was another's.
bool holds_death_report(const ReportStore& store, const std::string& kernel_id, int kernel_pid,
                        std::int64_t since_ms = 0);

struct Adoption {
  int moved = 0;
  int waiting = 0;      // meant for the store and still in the fallback location
  std::string problem;  // why the store refused one; the rest wait for the next try
};

// Moves the fallback reports meant for `store` into it: each written there atomically, never
// over another, then removed from the fallback. Stops at the first the store refuses.
Adoption adopt_fallback_reports(
    const ReportStore& store,
    const std::filesystem::path& fallback_dir = ReportStore::fallback_dir());

}  // namespace kwd::report
