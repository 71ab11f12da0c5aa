#include <algorithm>
#include <regex>
#include <set>

#include "kwd/diagnosis/caught_signal.hpp"
#include "kwd/diagnosis/rule_context.hpp"

namespace kwd::diagnosis {
namespace {

using nlohmann::json;

const std::set<std::string> kNativeCrashSignals{"SIGSEGV", "SIGBUS", "SIGILL",
                                                "SIGFPE",  "SIGSYS", "SIGTRAP"};

class CrashRules : public RuleContext {
 public:
  using RuleContext::RuleContext;

  std::optional<Finding> native_crash() const {
    if (!in_.death.signaled) return caught_by_the_kernel();
    if (!kNativeCrashSignals.contains(in_.death.signal_name)) return std::nullopt;
    Finding f;
    f.cause = CauseId::native_crash;
    f.confidence = "high";
    termination(f);
    traceback(f);
    const SignatureHit* h = in_.best_hit(CauseId::native_crash);
    if (h != nullptr) hit(f, *h);
    more_hits(f, CauseId::native_crash, h);
    // Context: frameworks keep a device full in normal use (TensorFlow maps it all).
    if (auto device = full_device()) f.evidence.push_back(*device);
    // A CPU-feature mismatch is an abort by message but a SIGILL by signal.
    if (const auto* ill = in_.best_hit(CauseId::abort); ill && in_.death.signal_name == "SIGILL")
      hit(f, *ill);
    cell(f);
    f.headline = title(f) + ": " + in_.death.signal_name + " (" +
                 signal_meaning(in_.death.signal_name)
                     .substr(0, signal_meaning(in_.death.signal_name).find(':')) +
                 ")";
    native_stack(f);
    const auto site = crash_site();
    const auto culprit = native_culprit();
    if (culprit) f.headline += " in " + culprit->first;
    if (site) f.headline += (culprit ? ", called from " : " in ") + site->first;
    if (!site || site->first.find(" of cell [") == std::string::npos) f.headline += cell_phrase();
    if (!in_.traceback.is_object())
      f.missing.push_back(shim_never_ran().value_or(
          "python_traceback: no faulthandler dump in the stderr tail, so the Python line that "
          "called into native code is unknown (faulthandler off, or not a Python kernel)"));
    return f;
  }

  // An exit after the kernel's own handler said it caught a fatal signal (xeus-python's:
  // "Error: signal 11:", its native stack, exit(1)): a native crash, said as what it was.
  std::optional<Finding> caught_by_the_kernel() const {
    if (!in_.death.exit_code || *in_.death.exit_code == 0) return std::nullopt;
    // The handler writes to the process's own stderr (not a cell's stream on IOPub); its last
    // message is the one that ended it (in_.hits holds only lines the kernel did not survive).
    const SignatureHit* said = nullptr;
    for (const auto& h : in_.hits)
      if (h.signature->id == "xeus.fatal_signal" && h.pointer == "/stderr_tail/text" &&
          (said == nullptr || h.offset > said->offset))
        said = &h;
    if (said == nullptr) return std::nullopt;
    const std::string text = v_.text(said->pointer).value_or("");
    const auto line_end = std::min(text.find('\n', said->offset), text.size());
    const auto caught = parse_caught_signal(
        std::string_view(text).substr(said->offset, line_end - said->offset),
        line_end < text.size() ? std::string_view(text).substr(line_end + 1) : std::string_view{});
    if (!caught || (!kNativeCrashSignals.contains(caught->name) && caught->name != "SIGABRT"))
      return std::nullopt;
    Finding f;
    f.cause = caught->name == "SIGABRT" ? CauseId::abort : CauseId::native_crash;
    f.confidence = "high";
    termination(f);
    hit(f, *said);
    traceback(f);
    cell(f);
    const auto culprit = caught_signal_culprit(*caught);
    if (culprit)
      f.evidence.push_back({"the kernel's native stack (printed by its handler): " + *culprit +
                                ", the first frame outside the handler, the C/C++ runtime and the "
                                "interpreter",
                            said->pointer, said->line});
    const std::string meaning = signal_meaning(caught->name);
    f.headline = title(f) + ": " + caught->name +
                 (meaning.empty() ? "" : " (" + meaning.substr(0, meaning.find(':')) + ")");
    if (culprit) f.headline += " in " + *culprit;
    if (const auto site = crash_site()) f.headline += ", called from " + site->first;
    f.headline += ", caught by the kernel's own handler, which exited with code " +
                  std::to_string(*in_.death.exit_code);
    if (f.headline.find(" of cell [") == std::string::npos) f.headline += cell_phrase();
    if (!in_.traceback.is_object())
      f.missing.push_back(
          "python_traceback: the kernel's own signal handler replaced faulthandler's, so there is "
          "no Python stack of the crash (its native stack is in the stderr tail)");
    return f;
  }

  std::optional<Finding> aborted() const {
    if (!in_.death.signaled || in_.death.signal_name != "SIGABRT") return std::nullopt;
    Finding f;
    f.cause = CauseId::abort;
    f.confidence = "high";
    termination(f);
    // The library's own message says more than faulthandler's generic "Aborted".
    const SignatureHit* reason = nullptr;
    for (const auto& h : in_.hits)
      if (h.signature->supports == cause(CauseId::abort).id &&
          h.signature->id != "python.faulthandler_abort" &&
          (reason == nullptr ||
           std::make_tuple(h.recent(), h.line) > std::make_tuple(reason->recent(), reason->line)))
        reason = &h;
    if (reason == nullptr) reason = in_.best_hit(CauseId::abort);
    if (reason != nullptr) hit(f, *reason);
    more_hits(f, CauseId::abort, reason);
    traceback(f);
    native_stack(f);
    cell(f);
    f.headline = title(f);
    const auto culprit = native_culprit();
    const auto site = crash_site();
    const bool in_cell = site && site->first.find(" of cell [") != std::string::npos;
    if (reason != nullptr && reason->signature->id != "python.faulthandler_abort") {
      f.headline += ": " + shorten(reason->from_match, 110);
      if (culprit) f.headline += ", in " + culprit->first;
    } else if (culprit) {
      f.headline += " in " + culprit->first;
      if (in_cell) f.headline += ", called from " + site->first;
    } else if (in_cell) {
      f.headline += " in " + site->first;
    }
    if (f.headline.find(" of cell [") == std::string::npos) f.headline += cell_phrase();
    if (reason == nullptr || reason->signature->id == "python.faulthandler_abort")
      f.missing.push_back(
          "stderr: no recognised message from the library that aborted (see the stderr tail)");
    if (!in_.traceback.is_object())
      f.missing.push_back(
          shim_never_ran().value_or("python_traceback: no faulthandler dump in the stderr tail"));
    return f;
  }

  std::optional<Finding> other_signal() const {
    if (!in_.death.signaled) return std::nullopt;
    Finding f;
    f.cause = CauseId::killed;
    f.confidence = "high";
    termination(f);
    cell(f);
    // A signal the watchdog was sent too went to the whole process group: the kernel
    // manager (an interrupt, a shutdown) or the terminal, not a stranger.
    const auto& received = v_.array("/termination/watchdog_received");
    const bool to_group = std::any_of(received.begin(), received.end(), [&](const auto& s) {
      return s.is_string() && s.template get<std::string>() == in_.death.signal_name;
    });
    if (to_group) {
      f.evidence.push_back({"the watchdog received " + in_.death.signal_name +
                                " too: it was sent to the kernel's whole process group",
                            "/termination/watchdog_received"});
      f.headline = "Killed by " + in_.death.signal_name +
                   " sent to the kernel's process group (by its kernel manager or the "
                   "terminal; an interrupt the kernel did not handle)" +
                   cell_phrase();
      return f;
    }
    f.headline = "Killed by " + in_.death.signal_name +
                 " sent to the kernel by another process (not by its kernel manager)" +
                 cell_phrase();
    return f;
  }

  // The exception that ended the interpreter, from the last traceback in the stderr tail.
  [[nodiscard]] std::optional<Evidence> fatal_exception() const {
    const auto text = v_.text("/stderr_tail/text");
    if (!text) return std::nullopt;
    const auto tb = text->rfind("Traceback (most recent call last):");
    if (tb == std::string::npos) return std::nullopt;
    static const std::regex exception_line(
        R"(^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt))(: .*)?$)");
    std::string line, found;
    int line_no = 1 + static_cast<int>(
                          std::count(text->begin(), text->begin() + static_cast<long>(tb), '\n'));
    int found_line = 0, n = line_no;
    std::size_t start = tb;
    while (start < text->size()) {
      const auto end = std::min(text->find('\n', start), text->size());
      line = text->substr(start, end - start);
      if (std::regex_match(line, exception_line)) {
        found = line;
        found_line = n;
      }
      start = end + 1;
      ++n;
    }
    if (found.empty()) return std::nullopt;
    return Evidence{"stderr line " + std::to_string(found_line) + ": " + shorten(found, 200),
                    "/stderr_tail/text", found_line};
  }

  std::optional<Finding> exit_status() const {
    if (in_.death.signaled || !in_.death.exit_code) return std::nullopt;
    const auto code = *in_.death.exit_code;
    Finding f;
    termination(f);
    if (code == 0) {
      f.cause = CauseId::exited;
      f.confidence = "high";
      cell(f);
      f.headline = title(f) + cell_phrase();
      return f;
    }
    f.cause = CauseId::exited_with_error;
    f.confidence = "high";
    if (code > 128 && code <= 128 + 64)
      f.evidence.push_back({"exit code " + std::to_string(code) + " = 128 + " +
                                std::to_string(code - 128) +
                                ": how a shell or wrapper reports a child killed by signal " +
                                std::to_string(code - 128),
                            "/termination/exit_code"});
    std::string why;
    if (auto e = fatal_exception()) {
      f.evidence.push_back(*e);
      why = e->fact.substr(e->fact.find(": ") + 2);
    }
    if (auto ename = v_.text("/execution/last_error/ename")) {
      const auto until = last_error_survived_until();
      std::string fact = until ? "earlier error, survived (cell [" + std::to_string(*until) +
                                     "] ran to its end after it): " + *ename
                               : "last error the notebook showed: " + *ename;
      if (auto evalue = v_.text("/execution/last_error/evalue"); evalue && !evalue->empty())
        fact += ": " + shorten(*evalue, 160);
      f.evidence.push_back({fact, "/execution/last_error"});
    }
    more_hits(f, CauseId::abort, nullptr);
    cell(f);
    f.headline = "Kernel process exited with code " + std::to_string(code);
    if (!why.empty()) f.headline += " after " + shorten(why, 110);
    f.headline += cell_phrase();
    return f;
  }
};

}  // namespace

std::optional<Finding> native_crash_rule(const DiagnosisInput& input) {
  return CrashRules(input).native_crash();
}

std::optional<Finding> abort_rule(const DiagnosisInput& input) {
  return CrashRules(input).aborted();
}

std::optional<Finding> other_signal_rule(const DiagnosisInput& input) {
  return CrashRules(input).other_signal();
}

std::optional<Finding> exit_status_rule(const DiagnosisInput& input) {
  return CrashRules(input).exit_status();
}

}  // namespace kwd::diagnosis
