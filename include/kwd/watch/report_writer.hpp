#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kwd/report/report_store.hpp"
#include "kwd/watch/watch.hpp"

namespace kwd::watch {

struct WrittenReport {
  nlohmann::json document;
  std::optional<std::filesystem::path> path;  // nullopt: nowhere could take it
  bool in_fallback = false;  // the report store could not take it; the fallback store did
};

// Builds the crash (context.end set) or hang (context.end null) report of a watched kernel
// and stores it in `report_dir` (empty: the configured store), falling back to the private
// temporary store when that cannot be written; logs where it went. Never throws.
WrittenReport write_report(Watch& watch, const ReportContext& context, const std::string& kernel_id,
                           const std::string& report_dir);

// The two halves of write_report, for a front end that decides on the built report whether
// and when to store it. nullopt: it could not be built (logged). Neither throws.
std::optional<nlohmann::json> build_report(Watch& watch, const ReportContext& context,
                                           const std::string& kernel_id);
WrittenReport store_report(const Watch& watch, nlohmann::json document,
                           const ReportContext& context, const std::string& kernel_id,
                           const std::string& report_dir);

// Moves into `store` the reports that waited for it in the fallback location, and logs how
// many: for a writer that finds the store taking writes again. Returns how many still wait
// (the store refused again). Never throws.
int adopt_waiting_reports(const report::ReportStore& store) noexcept;

// True the first time a report directory is found unusable in this process (at start or at a
// death), so that the trouble is said in one line, not again at every report.
bool first_trouble_with(const std::filesystem::path& report_dir);

}  // namespace kwd::watch
