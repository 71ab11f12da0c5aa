#include "kwd/smoke/failure_explanation.hpp"

#include "kwd/diagnosis/cell_failure.hpp"
#include "kwd/protocol/content_fields.hpp"
#include "kwd/report/terminal_text.hpp"

namespace kwd::smoke {
namespace {

// The decisive lines are the last ones; a cell may have written megabytes before them.
constexpr std::size_t kTextKept = 16 * 1024;

std::string tail(std::string text) {
  if (text.size() > kTextKept) text.erase(0, text.size() - kTextKept);
  return text;
}

}  // namespace

void explain_failure(CellResult& cell, const nlohmann::json& error, const std::string& stderr_text,
                     watch::Watch& watch) {
  diagnosis::CellFailureFacts facts;
  facts.ename = protocol::text_field(error, "ename");
  facts.evalue = protocol::text_field(error, "evalue");
  facts.traceback = tail(cell.details);
  facts.stderr_text = tail(report::without_ansi_sequences(stderr_text));
  facts.watch = watch.live_facts();
  const auto finding = diagnosis::explain_cell_failure(facts);
  if (!finding) return;
  cell.cause = finding->cause;
  cell.headline = finding->headline;
  cell.evidence = finding->evidence;
  cell.gpu_out_of_memory = finding->gpu_memory;
  for (const auto& r : finding->remedies)
    cell.remedies.emplace_back(r.id, r.text);
  std::string said = "\nWhy: " + finding->headline + "\n";
  for (const auto& e : finding->evidence)
    said += "  - " + e + "\n";
  for (const auto& r : finding->remedies)
    said += "What to do: " + r.text + "\n";
  cell.details += said;
}

}  // namespace kwd::smoke
