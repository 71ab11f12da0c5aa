#include <cmath>
#include <cstdio>
#include <set>

#include "kwd/diagnosis/rule_context.hpp"
#include "kwd/diagnosis/stuck_reason.hpp"

namespace kwd::diagnosis {
namespace {

class Rules : public RuleContext {
 public:
  using RuleContext::RuleContext;

  Finding run() {
    if (auto f = hang()) return finish(std::move(*f));
    for (auto rule : {&oom_kill_rule, &sigkill_rule, &gpu_fault_rule, &gpu_oom_rule,
                      &shared_memory_rule, &cpu_unsupported_rule, &native_crash_rule, &abort_rule,
                      &other_signal_rule, &exit_status_rule})
      if (auto f = rule(in_)) return finish(std::move(*f));
    return finish(unknown());
  }

 private:
  std::optional<Finding> hang() const {
    if (v_.text("/kind").value_or("") != "hang" && !v_.has("/hang")) return std::nullopt;
    Finding f;
    f.cause = CauseId::hang;
    const auto misses = v_.integer("/hang/consecutive_misses")
                            .value_or(v_.integer("/heartbeat/consecutive_misses").value_or(0));
    const auto needed = v_.integer("/heartbeat/misses_to_hang").value_or(0);
    const auto timeout_ms = v_.integer("/heartbeat/timeout_ms").value_or(0);
    f.confidence = needed > 0 && misses >= needed ? "high" : "medium";
    std::string silent;
    if (misses > 0) {
      f.evidence.push_back({std::to_string(misses) + " heartbeats in a row went unanswered",
                            v_.has("/hang/consecutive_misses") ? "/hang/consecutive_misses"
                                                               : "/heartbeat/consecutive_misses"});
      // A hang found within seconds (short heartbeat timeouts) is said to the tenth.
      if (timeout_ms > 0) {
        const double seconds =
            static_cast<double>(misses) * static_cast<double>(timeout_ms) / 1000.0;
        char buf[32];
        std::snprintf(buf, sizeof buf,
                      seconds < 10 && seconds != std::floor(seconds) ? "%.1f" : "%.0f", seconds);
        silent = std::string(" for ") + buf + " s";
      }
    }
    std::string state;
    if (auto s = v_.text("/hang/process_state")) {
      state = *s;
      f.evidence.push_back({"kernel process state: " + *s, "/hang/process_state"});
    }
    int blocked = 0;
    const auto& threads = v_.array("/hang/threads");
    for (std::size_t i = 0; i < threads.size(); ++i) {
      const ReportView t(threads[i]);
      if (!t.text("/state").value_or("").starts_with('D')) continue;
      if (blocked++ < 3)
        f.evidence.push_back(
            {"thread " + t.scalar("/tid").value_or("?") + " (" + t.text("/name").value_or("?") +
                 ") in uninterruptible sleep, waiting in " + t.text("/wchan").value_or("?"),
             "/hang/threads/" + std::to_string(i)});
    }
    // What the stacks taken at the hang show it waits on.
    std::optional<StuckReason> stuck;
    if (const auto* stacks = v_.find("/hang/stacks"); stacks != nullptr && stacks->is_object())
      stuck = stuck_reason(*stacks);
    if (stuck)
      f.evidence.push_back({"where it is stuck: " + stuck->text, "/hang/stacks" + stuck->pointer});
    cell(f);
    f.headline = title(f) + silent + cell_phrase();
    if (stuck) f.headline += ", " + stuck->text.substr(0, stuck->text.find(':'));
    if (v_.has("/startup")) never_ready(f);
    if (!state.empty()) f.headline += "; process state " + state;
    if (!v_.has("/heartbeat")) f.missing.push_back("heartbeat: no heartbeat history in the report");
    return f;
  }

  // A kernel that never became ready (smoke's "startup" section): what it never answered,
  // and the kernelspec and the start-up timeout, which is what the person can change.
  void never_ready(Finding& f) const {
    const std::string name = v_.text("/startup/kernel_name").value_or("");
    std::string within;
    if (const auto timeout = v_.number("/startup/timeout_s"); timeout && *timeout > 0) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", *timeout);
      within = std::string(" within the ") + buf + " s start-up timeout (--startup-timeout)";
    }
    const bool answered = v_.flag("/startup/kernel_info_answered");
    f.headline = "The kernel" + (name.empty() ? std::string() : " of kernelspec '" + name + "'") +
                 " never became ready: " +
                 (answered ? "it answered kernel_info_request but published nothing on IOPub"
                           : "no reply to kernel_info_request") +
                 within;
    f.evidence.insert(f.evidence.begin(),
                      {answered ? "the kernel answered kernel_info_request, but nothing came "
                                  "on IOPub"
                                : "the kernel never answered kernel_info_request",
                       "/startup/kernel_info_answered"});
  }

  [[nodiscard]] Finding unknown() const {
    Finding f;
    f.cause = CauseId::unknown;
    f.confidence = "low";
    f.headline = title(f);
    f.missing.push_back("termination: no exit status or signal was recorded");
    for (const auto& h : in_.hits)
      hit(f, h);
    return f;
  }

  // What the kernel survived before it died, said as context: the evidence of the death
  // itself comes first, and none of this names the cause.
  void earlier(Finding& f) const {
    constexpr std::size_t kMaxSaid = 4;
    const auto survived_phrase = [](const std::optional<std::int64_t>& until) {
      return " (survived: " +
             (until && *until >= 0 ? "cell [" + std::to_string(*until) + "]"
                                   : std::string("a later cell")) +
             " ran to its end after it), ";
    };
    // A GPU fault the kernel went on from (the device-side assert of cell 2, the kernel
    // restarted nothing and cell 3 ran): the driver's word, said once per Xid.
    std::set<std::int64_t> xids_said;
    for (auto x = in_.earlier_xid_events.rbegin(); x != in_.earlier_xid_events.rend(); ++x) {
      if (xids_said.size() >= kMaxSaid || !xids_said.insert(x->xid).second) continue;
      std::string fact = "earlier";
      if (x->cell) fact += ", in cell [" + std::to_string(*x->cell) + "]";
      f.evidence.push_back(
          {fact + survived_phrase(x->survived_until_cell) + x->fact(), x->pointer()});
    }
    std::set<std::string> said;
    for (auto h = in_.earlier_hits.rbegin(); h != in_.earlier_hits.rend(); ++h) {
      if (said.size() >= kMaxSaid || !said.insert(h->signature->id).second) continue;
      std::string fact = "earlier";
      if (h->cell) fact += ", in cell [" + std::to_string(*h->cell) + "]";
      fact += survived_phrase(h->survived_until_cell) + h->label + " line " +
              std::to_string(h->line) + ": " + h->excerpt + "  [" + h->signature->id + "]";
      f.evidence.push_back({fact, h->pointer, h->line});
    }
  }

  Finding finish(Finding f) const {
    earlier(f);
    if (!v_.has("/execution"))
      f.missing.push_back(
          "execution: which cell was running is unknown (the watchdog received no messages from "
          "the "
          "kernel)");
    if (!v_.has("/fingerprint"))
      f.missing.push_back(
          "fingerprint: the frameworks the kernel had loaded are unknown, so the advice is "
          "generic");
    return f;
  }
};

}  // namespace

Finding classify(const DiagnosisInput& input) {
  return Rules(input).run();
}

}  // namespace kwd::diagnosis
