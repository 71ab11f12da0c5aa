#include "kwd/report/report_document.hpp"

#include "kwd/diagnosis/causes.hpp"
#include "kwd/diagnosis/report_view.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/private_files.hpp"

namespace kwd::report {

std::string make_report_id(std::int64_t died_at_ms, const std::string& kernel_id, int kernel_pid) {
  std::string shortid = kernel_id.substr(0, 8);
  for (char& c : shortid)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
  if (shortid.empty()) shortid = "kernel";
  // Milliseconds and a random tail: a hang report and the crash 0.3 s later, or two
  // containers' kernels that both are pid 2, never share a name (and the store never
  // replaces a report: a clash fails the write instead).
  std::string stamp = util::compact_utc(died_at_ms);
  const auto ms = std::to_string(1000 + ((died_at_ms % 1000) + 1000) % 1000).substr(1);
  stamp.insert(stamp.size() - 1, "." + ms);
  return stamp + "-" + shortid + "-" + std::to_string(kernel_pid) + "-" + util::random_name(4);
}

std::string to_text(const nlohmann::json& document, int indent) {
  return document.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string cause_line(const nlohmann::json& document) {
  const diagnosis::ReportView v(document);
  if (auto headline = v.text("/diagnosis/headline"); headline && !headline->empty())
    return *headline;
  if (auto description = v.text("/termination/description"); description && !description->empty())
    return *description;
  using diagnosis::CauseId;
  const bool hang = v.text("/kind").value_or("") == "hang";
  return std::string(diagnosis::cause(hang ? CauseId::hang : CauseId::unknown).title);
}

}  // namespace kwd::report
