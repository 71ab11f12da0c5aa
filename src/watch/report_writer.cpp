#include "kwd/watch/report_writer.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <mutex>
#include <set>
#include <utility>

#include "kwd/logging/log_fields.hpp"
#include "kwd/report/fallback_reports.hpp"
#include "kwd/report/report_document.hpp"
#include "kwd/report/report_store.hpp"
#include "kwd/report/terminal_summary.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::watch {
namespace {

// "killed by SIGSEGV", "stopped answering heartbeats": what the log line says happened.
std::string what_happened(const ReportContext& context) {
  const ProcessEnd* end = context.end;
  return end == nullptr ? "stopped answering heartbeats"
         : end->status  ? end->status->describe()
                        : "ended (" + end->how_known + ")";
}

std::string diagnosis_text(const nlohmann::json& report, const char* field) {
  const auto d = report.find("diagnosis");
  if (d == report.end() || !d->is_object()) return "";
  const auto value = d->find(field);
  return value != d->end() && value->is_string() ? value->get<std::string>() : "";
}

// " (the diagnosis' headline)": the log line says why, not only the signal.
std::string verdict(const nlohmann::json& report) {
  const auto headline = diagnosis_text(report, "headline");
  return headline.empty() ? "" : " (" + headline + ")";
}

// The fields a log shipper or `journalctl CAUSE=oom_killed` selects a report's line by.
std::vector<logging::LogFields::Field> report_fields(const std::string& kernel_id,
                                                     const nlohmann::json& report,
                                                     const std::filesystem::path& path) {
  std::vector<logging::LogFields::Field> fields;
  if (!kernel_id.empty()) fields.emplace_back("kernel_id", kernel_id);
  if (auto cause = diagnosis_text(report, "cause"); !cause.empty())
    fields.emplace_back("cause", std::move(cause));
  fields.emplace_back("report", path.string());
  return fields;
}

// With neither the store nor the fallback writable (a full or read-only disk), stderr is the
// last place the answer can reach the user: the terminal, the server log, the journal.
void print_summary_instead(const nlohmann::json& report) noexcept {
  try {
    const std::string summary = report::render_summary(report, report::SummaryStyle{});
    std::fwrite(summary.data(), 1, summary.size(), stderr);
    std::fflush(stderr);
  } catch (const std::exception& e) {
    spdlog::error("the report's summary could not be rendered either: {}", e.what());
  }
}

}  // namespace

int adopt_waiting_reports(const report::ReportStore& store) noexcept {
  try {
    const auto adopted = report::adopt_fallback_reports(store);
    if (adopted.moved > 0)
      spdlog::info("{} report{} that waited in the fallback location moved into {}", adopted.moved,
                   adopted.moved == 1 ? "" : "s", store.dir().string());
    if (!adopted.problem.empty())
      spdlog::debug("reports still wait in the fallback location: {}", adopted.problem);
    return adopted.waiting;
  } catch (const std::exception& e) {
    spdlog::debug("reports in the fallback location not moved: {}", e.what());
    return 1;  // looked at again next time
  }
}

bool first_trouble_with(const std::filesystem::path& report_dir) {
  static std::mutex mutex;
  static std::set<std::string> said;
  const std::lock_guard lock(mutex);
  return said.insert(report_dir.lexically_normal().string()).second;
}

std::optional<nlohmann::json> build_report(Watch& watch, const ReportContext& context,
                                           const std::string& kernel_id) {
  const std::string id = report::make_report_id(context.at_ms, kernel_id, watch.pid());
  try {
    return watch.build_report(context, id);
  } catch (const std::exception& e) {  // build_report says it never throws; fail open anyway
    spdlog::error("kernel {} {}; no {} report could be built: {}", watch.pid(),
                  what_happened(context), context.end != nullptr ? "crash" : "hang", e.what());
    return std::nullopt;
  }
}

WrittenReport write_report(Watch& watch, const ReportContext& context, const std::string& kernel_id,
                           const std::string& report_dir) {
  const std::int64_t build_start_ns = util::steady_ns();
  auto document = build_report(watch, context, kernel_id);
  if (!document) return {};
  spdlog::debug("report of kernel {}: built in {} us", watch.pid(),
                (util::steady_ns() - build_start_ns) / 1000);
  return store_report(watch, std::move(*document), context, kernel_id, report_dir);
}

WrittenReport store_report(const Watch& watch, nlohmann::json document,
                           const ReportContext& context, const std::string& kernel_id,
                           const std::string& report_dir) {
  WrittenReport out;
  out.document = std::move(document);
  // The id the document was built with (it carries a random part): the file is named by it.
  const auto built_id = out.document.find("id");
  const std::string id = built_id != out.document.end() && built_id->is_string()
                             ? built_id->get<std::string>()
                             : report::make_report_id(context.at_ms, kernel_id, watch.pid());
  const std::string what = what_happened(context);
  const char* kind = context.end != nullptr ? "crash" : "hang";
  std::string cap_problem;
  const auto limits = report::StoreLimits::from_environment(&cap_problem);
  static bool cap_problem_said = false;
  if (!cap_problem.empty() && !std::exchange(cap_problem_said, true))
    spdlog::warn("{}", cap_problem);
  const report::ReportStore primary(report::ReportStore::resolve_dir(report_dir), limits);
  const std::int64_t write_start_ns = util::steady_ns();
  const auto written = report::write_or_fall_back(primary, id, out.document, limits);
  out.path = written.path;
  out.in_fallback = written.in_fallback;
  if (written.refused.empty()) {
    // Where the milliseconds between a death and its report go (bench/death_bench.py).
    spdlog::debug("report of kernel {}: written in {} us", watch.pid(),
                  (util::steady_ns() - write_start_ns) / 1000);
    const logging::LogFields fields(report_fields(kernel_id, out.document, *out.path));
    spdlog::warn("kernel {} {}{}; {} report: {}", watch.pid(), what, verdict(out.document), kind,
                 out.path->string());
    adopt_waiting_reports(primary);
    return out;
  }
  if (first_trouble_with(primary.dir()))
    spdlog::warn("cannot write the {} report to {}: {}", kind, primary.dir().string(),
                 written.refused);
  else
    spdlog::debug("cannot write the {} report to {}: {}", kind, primary.dir().string(),
                  written.refused);
  if (written.in_fallback) {
    const logging::LogFields fields(report_fields(kernel_id, out.document, *out.path));
    spdlog::warn("kernel {} {}{}; {} report (fallback location): {}", watch.pid(), what,
                 verdict(out.document), kind, out.path->string());
  } else {
    spdlog::error("kernel {} {}; no {} report could be written: {}; its summary follows",
                  watch.pid(), what, kind, written.fallback_refused);
    print_summary_instead(out.document);
  }
  return out;
}

}  // namespace kwd::watch
