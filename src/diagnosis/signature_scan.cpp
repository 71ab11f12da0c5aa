#include "kwd/diagnosis/signature_scan.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "kwd/diagnosis/pattern_literals.hpp"

namespace kwd::diagnosis {
namespace {

// std::regex recurses per character: a pathological line (a progress bar without
// newlines) must not exhaust the stack, and no signature needs more than this.
constexpr std::size_t kMaxLineForMatching = 2000;
constexpr std::size_t kExcerptLength = 240;

std::string trimmed_excerpt(std::string_view line) {
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
    line.remove_prefix(1);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t'))
    line.remove_suffix(1);
  std::string out(line.substr(0, kExcerptLength));
  if (line.size() > kExcerptLength) out += "…";
  return out;
}

void add_source(std::vector<TextSource>& out, const nlohmann::json& report, const char* pointer,
                const char* label, const char* arrivals_pointer = "") {
  const nlohmann::json::json_pointer ptr{pointer};
  if (!report.contains(ptr)) return;
  const auto& v = report.at(ptr);
  if (v.is_string() && !v.get_ref<const std::string&>().empty())
    out.push_back({pointer, label, v.get_ref<const std::string&>(), arrivals_pointer, {}});
}

}  // namespace

std::vector<TextSource> text_sources(const nlohmann::json& report) {
  std::vector<TextSource> out;
  if (!report.is_object()) return out;
  add_source(out, report, "/stderr_tail/text", "stderr", "/stderr_tail/arrivals");
  add_source(out, report, "/execution/stream_stderr_tail", "the notebook's stderr output",
             "/execution/stream_stderr_arrivals");
  // The last error's name too: Python's MemoryError often comes without a message.
  const std::size_t errors_from = out.size();
  add_source(out, report, "/execution/last_error/ename", "last error");
  add_source(out, report, "/execution/last_error/evalue", "last error");
  const nlohmann::json::json_pointer count{"/execution/last_error/execution_count"};
  if (report.contains(count) && report.at(count).is_number_integer())
    for (std::size_t i = errors_from; i < out.size(); ++i)
      out[i].cell = report.at(count).get<std::int64_t>();
  const nlohmann::json::json_pointer log{"/oom_evidence/kernel_log"};
  if (report.contains(log) && report.at(log).is_array()) {
    const auto& lines = report.at(log);
    for (std::size_t i = 0; i < lines.size(); ++i)
      if (lines[i].is_string())
        out.push_back({"/oom_evidence/kernel_log/" + std::to_string(i), "kernel log",
                       lines[i].get_ref<const std::string&>(), "", std::nullopt});
  }
  return out;
}

std::vector<SignatureHit> scan(const SignatureTable& table,
                               const std::vector<TextSource>& sources) {
  std::vector<SignatureHit> hits;
  for (const auto& source : sources) {
    // Lines first, so each signature's last match is found in one pass.
    std::vector<std::string_view> lines;
    std::size_t start = 0;
    const std::string_view text = source.text;
    for (std::size_t i = 0; i <= text.size(); ++i) {
      if (i == text.size() || text[i] == '\n' || text[i] == '\r') {
        if (i == text.size() && start == i) break;
        lines.push_back(text.substr(start, i - start));
        if (i + 1 < text.size() && text[i] == '\r' && text[i + 1] == '\n') ++i;  // CRLF
        start = i + 1;
      }
    }
    std::map<const Signature*, SignatureHit> found;
    for (std::size_t n = 0; n < lines.size(); ++n) {
      const std::string_view line = lines[n].substr(0, kMaxLineForMatching);
      if (line.empty()) continue;
      for (const auto& sig : table.signatures()) {
        if (!may_match(line, sig.literals)) continue;
        std::match_results<std::string_view::const_iterator> m;
        if (!std::regex_search(line.begin(), line.end(), m, sig.regex)) continue;
        auto& hit = found[&sig];
        hit.signature = &sig;
        hit.pointer = source.pointer;
        hit.label = source.label;
        hit.line = static_cast<int>(n) + 1;
        hit.lines_in_source = static_cast<int>(lines.size());
        hit.matches += 1;
        hit.excerpt = trimmed_excerpt(lines[n]);
        hit.from_match = trimmed_excerpt(lines[n].substr(static_cast<std::size_t>(m.position(0))));
        hit.offset = static_cast<std::size_t>(lines[n].data() - text.data());
        hit.arrivals_pointer = source.arrivals_pointer;
        hit.cell = source.cell;
      }
    }
    for (auto& [sig, hit] : found)
      hits.push_back(std::move(hit));
  }
  return hits;
}

}  // namespace kwd::diagnosis
