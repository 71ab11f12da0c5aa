#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kwd/diagnosis/signature_table.hpp"

namespace kwd::diagnosis {

// A text in the report that the kernel (or its libraries) wrote.
struct TextSource {
  std::string pointer;  // JSON pointer of the text in the report
  std::string label;    // how people call it: "stderr", "iopub stderr stream", ...
  std::string_view text;
};

// The last line of one source that matched one signature.
struct SignatureHit {
  const Signature* signature = nullptr;
  std::string pointer;
  std::string label;
  int line = 0;  // 1-based line number within the source
  int lines_in_source = 0;
  int matches = 0;      // how many lines of that source matched
  std::string excerpt;  // the matching line, trimmed and shortened
  // The line from where the pattern matched: what a headline quotes (free of log prefixes,
  // and of another thread's output that landed in front of it).
  std::string from_match;

  // Written close to the end: near the death rather than hours before it.
  [[nodiscard]] bool recent() const { return lines_in_source - line < 60; }
};

// The texts of a report worth scanning: the watchdog's stderr tail, the stderr stream seen
// on iopub, the last error's value and the kernel log lines the OOM probe kept.
std::vector<TextSource> text_sources(const nlohmann::json& report);

// Every signature that matches, one hit per (signature, source), most recent line kept.
std::vector<SignatureHit> scan(const SignatureTable& table, const std::vector<TextSource>& sources);

}  // namespace kwd::diagnosis
