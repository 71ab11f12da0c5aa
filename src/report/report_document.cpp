#include "kwd/report/report_document.hpp"

#include "kwd/util/clock.hpp"

namespace kwd::report {

std::string make_report_id(std::int64_t died_at_ms, const std::string& kernel_id, int kernel_pid) {
  std::string shortid = kernel_id.substr(0, 8);
  for (char& c : shortid)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
  if (shortid.empty()) shortid = "kernel";
  return util::compact_utc(died_at_ms) + "-" + shortid + "-" + std::to_string(kernel_pid);
}

std::string to_text(const nlohmann::json& document, int indent) {
  return document.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string cause_line(const nlohmann::json& document) {
  const auto& diag = document.value("/diagnosis"_json_pointer, nlohmann::json::object());
  if (diag.contains("headline")) return diag["headline"].get<std::string>();
  const auto& term = document.value("/termination"_json_pointer, nlohmann::json::object());
  return term.value("description", "unknown");
}

}  // namespace kwd::report
