#include "kwd/daemon/report_line.hpp"

namespace kwd::daemon {
namespace {

using json = nlohmann::json;

std::string cut(const std::string& s) {
  if (s.size() <= kMaxLineField) return s;
  std::size_t n = kMaxLineField - 3;
  // Not inside a UTF-8 sequence: back to the byte that starts one.
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
    --n;
  return s.substr(0, n) + "...";
}

// The value at `pointer` if it is a string, number or boolean (strings cut); null otherwise.
json scalar(const json& doc, const char* pointer) {
  const json::json_pointer p(pointer);
  if (!doc.is_object() || !doc.contains(p)) return nullptr;
  const json& v = doc.at(p);
  if (v.is_string()) return cut(v.get<std::string>());
  if (v.is_number() || v.is_boolean()) return v;
  return nullptr;
}

}  // namespace

std::string report_line(const json& report, const std::string& report_path) {
  const json kubernetes =
      report.is_object() && report.contains("kubernetes") ? report["kubernetes"] : json(nullptr);
  json line = {{"event", scalar(report, "/kind") == "hang" ? "kernel_hang" : "kernel_death"},
               {"report_id", scalar(report, "/id")},
               {"cause", scalar(report, "/diagnosis/cause")},
               {"confidence", scalar(report, "/diagnosis/confidence")},
               {"headline", scalar(report, "/diagnosis/headline")},
               {"termination", scalar(report, "/termination/description")},
               {"signal", scalar(report, "/termination/signal_name")},
               {"exit_code", scalar(report, "/termination/exit_code")},
               {"kernel_id", scalar(report, "/kernel/kernel_id")},
               {"pid", scalar(report, "/kernel/pid")},
               {"notebook", scalar(report, "/kernel/notebook")},
               {"report", report_path.empty() ? json(nullptr) : json(cut(report_path))}};
  if (kubernetes.is_object())
    for (const char* key : {"namespace", "pod", "pod_uid", "container", "container_id"})
      line[key] = scalar(kubernetes, (std::string("/") + key).c_str());
  if (kubernetes.is_object() && kubernetes.contains("memory"))
    for (const char* key : {"container_limit", "pod_limit", "group_killed", "container_emptied"})
      line[std::string("memory_") + key] =
          scalar(kubernetes, (std::string("/memory/") + key).c_str());
  // Invalid UTF-8 (a notebook path may be any bytes) is replaced, not thrown.
  std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() + 1 > kMaxReportLine) {  // cannot happen with the fields above; kept honest
    line = {{"event", line["event"]},
            {"report_id", line["report_id"]},
            {"cause", line["cause"]},
            {"report", line["report"]}};
    text = line.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return text + "\n";
}

}  // namespace kwd::daemon
