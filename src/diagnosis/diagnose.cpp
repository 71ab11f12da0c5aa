#include "kwd/diagnosis/diagnose.hpp"

#include <cstdlib>

#include "kwd/diagnosis/findings.hpp"
#include "kwd/diagnosis/python_traceback.hpp"
#include "kwd/diagnosis/signature_scan.hpp"

namespace kwd::diagnosis {
namespace {

// A source that stopped answering during the run is named whatever the cause: the reader
// learns what the report could not see after it, and everything else stands.
std::vector<std::string> failed_during_the_run(const ReportView& v) {
  std::vector<std::string> out;
  if (const auto since = v.integer("/gpu/failing_since_ms")) {
    std::string what;
    for (const auto& problem : v.array("/gpu/problems")) {
      if (!problem.is_string() || what.size() > 240) continue;
      what += (what.empty() ? "" : "; ") + problem.get<std::string>();
    }
    std::string when;
    if (const auto died = v.integer("/kernel/died_at_ms"); died && *died >= *since)
      when = " " + std::to_string((*died - *since + 500) / 1000) + " s before the death";
    out.push_back("gpu: NVML stopped answering during the run" + when +
                  (what.empty() ? "" : " (" + what + ")") +
                  "; the GPU readings after that are missing, those before it stand");
  }
  // The kernel log (Linux): without it an OOM kill is judged from the counters alone.
  if (v.has("/oom_evidence")) {
    if (!v.flag("/oom_evidence/kernel_log_readable")) {
      const auto why = v.text("/oom_evidence/kernel_log_problem");
      out.push_back("kernel log: not readable" + (why ? " (" + *why + ")" : std::string()) +
                    "; an OOM kill is judged from the OOM-kill counters alone, without the OOM "
                    "killer's own lines");
    } else if (const auto failed = v.text("/oom_evidence/kernel_log_failed")) {
      out.push_back("kernel log: reading it failed during the run (" + *failed +
                    "); the OOM killer's lines after that are missing, the counters stand");
    }
    if (const auto lost = v.integer("/oom_evidence/kernel_log_records_lost"); lost && *lost > 0)
      out.push_back("kernel log: records were overwritten before they were read (" +
                    std::to_string(*lost) + (*lost == 1 ? " time" : " times") +
                    ": the log was flooded during the run); an OOM killer's line among them "
                    "would be lost, the OOM-kill counters stand");
  }
  // The kernel's files on a mount that stopped answering (fingerprint_probe.cpp).
  if (v.has("/fingerprint/stalled")) {
    const auto path = v.text("/fingerprint/stalled/path");
    const auto waited = v.integer("/fingerprint/stalled/waiting_ms").value_or(0);
    out.push_back("fingerprint: the kernel's files stopped answering (" +
                  (path ? "reading " + *path : std::string("a read")) + " had waited " +
                  std::to_string((waited + 500) / 1000) +
                  " s when the report was made: a stalled mount?); the packages and libraries "
                  "it loaded after that are not named");
  }
  if (const auto count = v.integer("/watchdog/clock_steps/count"); count && *count > 0) {
    std::string steps;
    for (const auto& step : v.array("/watchdog/clock_steps/steps")) {
      if (!step.is_object() || steps.size() > 200) continue;
      const ReportView s(step);
      const auto by = s.integer("/by_ms").value_or(0);
      steps += (steps.empty() ? "" : ", ") + std::string(by >= 0 ? "+" : "-") +
               std::to_string((std::llabs(by) + 500) / 1000) + " s";
    }
    out.push_back("timing: the wall clock was stepped " +
                  (*count == 1 ? std::string("once") : std::to_string(*count) + " times") +
                  " during the watch (" + steps +
                  "); the report's times on either side of a step differ by that much");
  }
  return out;
}

}  // namespace

nlohmann::json diagnose(const nlohmann::json& report, const SignatureTable& table) {
  using nlohmann::json;
  static const json empty = json::object();
  // Every frame an object of string function/file/cell, integer line and boolean in_cell.
  const auto with_tolerant_frames = [](const json& tb) {
    json out = tb;
    json frames = json::array();
    for (const auto& frame : ReportView(tb).array("/frames")) {
      const ReportView f(frame);
      frames.push_back({{"function", f.text("/function").value_or("?")},
                        {"file", f.text("/file").value_or("?")},
                        {"line", f.integer("/line").value_or(0)},
                        {"in_cell", f.flag("/in_cell")},
                        {"cell", f.text("/cell").value_or("")}});
      if (auto code = f.text("/code")) frames.back()["code"] = *code;
    }
    out["frames"] = std::move(frames);
    return out;
  };
  DiagnosisInput input(report.is_object() ? report : empty);
  input.death = read_death(input.view);
  auto hits = scan(table, text_sources(input.view.report()));
  place_hits(input.view, hits);
  // A kernel's own fatal-signal handler (xeus-python's "Error: signal 11:") ends the process it
  // runs in: its line is never one the kernel survived. The order it was heard in says
  // nothing here: the kernel's last IOPub messages, flushed at its exit, can reach a loaded
  // watchdog after its stderr, so a cell that ended before the crash is heard ending after it
  // (a fresh run's test_other_kernels[xpython]).
  for (auto& h : hits)
    if (h.signature->id == "xeus.fatal_signal" && h.pointer == "/stderr_tail/text")
      h.survived_until_cell.reset();
  // What the kernel survived informs the story but takes no part in naming the cause.
  for (auto& h : hits)
    (h.survived() ? input.earlier_hits : input.hits).push_back(std::move(h));
  for (auto& x : read_xid_events(input.view))
    (x.survived() ? input.earlier_xid_events : input.xid_events).push_back(std::move(x));
  // A writer may have filled python_traceback already; else find it now. A stored one is
  // read through the tolerant view: its frames get the shape the rules expect.
  if (const auto* tb = input.view.find("/python_traceback"); tb && tb->is_object())
    input.traceback = with_tolerant_frames(*tb);
  else
    input.traceback = find_python_traceback(input.view.report());
  input.pressure = read_memory_pressure(input.view);
  input.frameworks = read_frameworks(input.view);
  input.language = input.view.text("/fingerprint/language").value_or("");
  input.gpu_contention = read_gpu_contention(input.view, input.hits);

  const Finding finding = classify(input);
  const auto remedies = choose_remedies(finding, input);

  json out;
  out["cause"] = cause(finding.cause).id;
  out["headline"] = finding.headline;
  out["confidence"] = finding.confidence;
  auto& evidence = out["evidence"] = json::array();
  for (const auto& e : finding.evidence) {
    json item = {{"fact", e.fact}, {"pointer", e.pointer}};
    if (e.line > 0) item["line"] = e.line;
    evidence.push_back(std::move(item));
  }
  auto& advice = out["remedies"] = json::array();
  for (const auto& r : remedies) {
    json item = {{"id", r.id}, {"text", r.text}, {"why", r.why}};
    if (r.action)
      item["action"] = {
          {"kind", r.action->kind}, {"label", r.action->label}, {"text", r.action->text}};
    advice.push_back(std::move(item));
  }
  out["missing"] = finding.missing;
  for (auto& line : failed_during_the_run(input.view))
    out["missing"].push_back(std::move(line));
  auto& matched = out["signatures"] = json::array();
  for (const auto* list : {&input.hits, &input.earlier_hits})
    for (const auto& h : *list) {
      json item = {{"id", h.signature->id},
                   {"supports", h.signature->supports},
                   {"strength", h.signature->strength},
                   {"pointer", h.pointer},
                   {"line", h.line},
                   {"matches", h.matches},
                   {"text", h.excerpt},
                   {"source", h.signature->source}};
      if (h.at_ms) item["at_ms"] = *h.at_ms;
      if (h.cell) item["cell"] = *h.cell;
      if (h.survived()) item["survived"] = true;
      matched.push_back(std::move(item));
    }
  out["table"] = {{"origin", table.origin()},
                  {"version", table.version()},
                  {"signatures", table.signatures().size()}};
  return out;
}

void complete_report(nlohmann::json& report) {
  try {
    if (!report.contains("python_traceback") || report["python_traceback"].is_null())
      report["python_traceback"] = find_python_traceback(report);
    report["diagnosis"] = diagnose(report);
  } catch (const std::exception& e) {
    report["diagnosis"] = {{"cause", cause(CauseId::unknown).id},
                           {"headline", "Cause unknown: the diagnosis failed"},
                           {"confidence", "low"},
                           {"evidence", nlohmann::json::array()},
                           {"remedies", nlohmann::json::array()},
                           {"missing", {std::string("diagnosis: ") + e.what()}}};
  }
}

nlohmann::json rediagnose(const nlohmann::json& stored) {
  nlohmann::json facts = stored.is_object() ? stored : nlohmann::json::object();
  facts.erase("diagnosis");
  facts.erase("python_traceback");
  complete_report(facts);
  return facts;
}

}  // namespace kwd::diagnosis
