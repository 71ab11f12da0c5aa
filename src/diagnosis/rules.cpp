#include <algorithm>
#include <cmath>
#include <cstdio>
#include <regex>
#include <set>

#include "kwd/diagnosis/findings.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::diagnosis {
namespace {

using nlohmann::json;

const std::set<std::string> kNativeCrashSignals{"SIGSEGV", "SIGBUS", "SIGILL",
                                                "SIGFPE",  "SIGSYS", "SIGTRAP"};

std::string signal_meaning(const std::string& name) {
  if (name == "SIGSEGV") return "segmentation fault: native code touched memory it does not own";
  if (name == "SIGBUS") return "bus error: a bad memory access, often a truncated mapped file";
  if (name == "SIGILL") return "illegal instruction: code for a CPU feature this machine lacks";
  if (name == "SIGFPE") return "arithmetic fault, e.g. an integer division by zero";
  if (name == "SIGSYS") return "a system call the process was not allowed to make";
  if (name == "SIGTRAP") return "a trap/breakpoint instruction in native code";
  if (name == "SIGABRT") return "the process aborted itself";
  if (name == "SIGKILL") return "it cannot be caught, so the kernel could not say why";
  return "";
}

std::string percent(double fraction) {
  return std::to_string(std::llround(std::clamp(fraction * 100.0, -1e15, 1e15))) + "%";
}

// The cause's own headline, which the rules extend with what the facts show.
std::string title(const Finding& f) {
  return std::string(cause(f.cause).title);
}

std::string shorten(const std::string& s, std::size_t n) {
  return s.size() <= n ? s : s.substr(0, n) + "…";
}

class Rules {
 public:
  explicit Rules(const DiagnosisInput& input) : in_(input), v_(input.view) {}

  Finding run() {
    for (auto rule :
         {&Rules::hang, &Rules::oom_kill, &Rules::killed, &Rules::gpu_fault, &Rules::gpu_oom,
          &Rules::native_crash, &Rules::aborted, &Rules::other_signal, &Rules::exit_status})
      if (auto f = (this->*rule)()) return finish(std::move(*f));
    return finish(unknown());
  }

 private:
  const DiagnosisInput& in_;
  const ReportView& v_;

  [[nodiscard]] bool sigkill() const {
    return in_.death.signaled && in_.death.signal_name == "SIGKILL";
  }

  // The first frame of the cell that was running on the crashing thread, if any.
  [[nodiscard]] std::optional<std::size_t> running_cell_frame() const {
    if (!in_.traceback.is_object()) return std::nullopt;
    const auto& frames = in_.traceback.value("frames", json::array());
    for (std::size_t i = 0; i < frames.size(); ++i)
      if (frames[i].value("cell", "") == "in flight") return i;
    return std::nullopt;
  }

  // " while cell [12] was running" / " while the kernel was idle" / "".
  [[nodiscard]] std::string cell_phrase() const {
    if (auto n = v_.integer("/execution/cell_in_flight/execution_count"))
      return " while cell [" + std::to_string(*n) + "] was running";
    if (v_.has("/execution/cell_in_flight") || running_cell_frame())
      return " while a cell was running";
    if (v_.text("/execution/state_at_death").value_or("") == "idle")
      return " while the kernel was idle";
    return "";
  }

  [[nodiscard]] std::string how_it_died() const {
    const auto& d = in_.death;
    if (d.signaled) return "died of " + d.signal_name;
    if (d.exit_code) return "exited with code " + std::to_string(*d.exit_code);
    return "ended";
  }

  void termination(Finding& f) const {
    const auto& d = in_.death;
    if (d.signaled) {
      std::string fact = "killed by " + d.signal_name;
      if (const auto meaning = signal_meaning(d.signal_name); !meaning.empty())
        fact += " (" + meaning + ")";
      if (d.core_dumped) fact += ", core dumped";
      f.evidence.push_back({fact, "/termination/signal_name"});
    } else if (d.exit_code) {
      f.evidence.push_back(
          {"exited with code " + std::to_string(*d.exit_code), "/termination/exit_code"});
    }
  }

  void hit(Finding& f, const SignatureHit& h) const {
    f.evidence.push_back({h.label + " line " + std::to_string(h.line) + ": " + h.excerpt + "  [" +
                              h.signature->id + ": " + h.signature->meaning + "]",
                          h.pointer, h.line});
  }

  // Hits that support `cause` (or only give context), other than `except`, as evidence.
  void more_hits(Finding& f, CauseId cause, const SignatureHit* except) const {
    const std::string_view id = diagnosis::cause(cause).id;
    for (const auto& h : in_.hits)
      if (&h != except && (h.signature->supports == id || h.signature->supports == "context"))
        hit(f, h);
  }

  void pressure(Finding& f, double at_least) const {
    if (!in_.pressure || in_.pressure->fraction() < at_least) return;
    const auto& p = *in_.pressure;
    f.evidence.push_back({"memory reached " +
                              util::format_bytes(static_cast<double>(p.used_bytes)) + " of the " +
                              util::format_bytes(static_cast<double>(p.limit_bytes)) + " " +
                              p.limit_name + " (" + percent(p.fraction()) + ")",
                          p.used_pointer});
  }

  void cell(Finding& f) const {
    if (auto n = v_.integer("/execution/cell_in_flight/execution_count")) {
      std::string fact = "cell [" + std::to_string(*n) + "] was running";
      if (auto s = v_.number("/execution/cell_in_flight/running_for_s")) {
        char buf[32];
        std::snprintf(buf, sizeof buf, *s < 10 ? "%.1f" : "%.0f", *s);
        fact += std::string(" for ") + buf + " s";
      }
      f.evidence.push_back({fact, "/execution/cell_in_flight"});
    } else if (const auto frame = running_cell_frame();
               frame && !v_.has("/execution/cell_in_flight")) {
      f.evidence.push_back(
          {"a cell was running (its code is on the crashing thread's stack) but the kernel never "
           "announced it to the notebook: it died within milliseconds of starting it",
           "/python_traceback/frames/" + std::to_string(*frame)});
    }
  }

  // The frame where Python was when it died, said briefly.
  [[nodiscard]] std::optional<std::pair<std::string, std::string>> crash_site() const {
    if (!in_.traceback.is_object() || !in_.traceback.contains("frames")) return std::nullopt;
    const auto& frames = in_.traceback["frames"];
    if (!frames.is_array() || frames.empty()) return std::nullopt;
    // The innermost frame in the notebook's own code says more than a library frame.
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const auto& fr = frames[i];
      if (!fr.value("in_cell", false)) continue;
      std::string where = fr.value("function", "?") + "()";
      if (where == "<module>()") where = "top-level code";
      where += ", line " + std::to_string(fr.value("line", 0));
      const auto n = v_.integer("/execution/cell_in_flight/execution_count");
      if (fr.value("cell", "") == "in flight")
        where += n ? " of cell [" + std::to_string(*n) + "]" : " of the running cell";
      else
        where += " of an earlier cell";
      return std::make_pair(where, "/python_traceback/frames/" + std::to_string(i));
    }
    const auto& top = frames[0];
    std::string file = top.value("file", "?");
    if (auto slash = file.rfind('/'); slash != std::string::npos) file = file.substr(slash + 1);
    return std::make_pair(
        top.value("function", "?") + "() in " + file + ":" + std::to_string(top.value("line", 0)),
        std::string("/python_traceback/frames/0"));
  }

  void traceback(Finding& f) const {
    if (!in_.traceback.is_object()) return;
    const auto& frames = in_.traceback.value("frames", json::array());
    if (frames.empty()) return;
    const auto& top = frames[0];
    std::string fact = "Python stack at the crash (faulthandler): " + top.value("function", "?") +
                       "() at " + top.value("file", "?") + ":" +
                       std::to_string(top.value("line", 0));
    if (auto site = crash_site(); site && site->second != "/python_traceback/frames/0")
      fact += ", called from " + site->first;
    f.evidence.push_back({fact, "/python_traceback/frames/0"});
  }

  // --- the rules, most specific first ---

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
      if (timeout_ms > 0) silent = " for " + std::to_string(misses * timeout_ms / 1000) + " s";
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
    cell(f);
    f.headline = title(f) + silent + cell_phrase();
    if (!state.empty()) f.headline += "; process state " + state;
    if (!v_.has("/heartbeat")) f.missing.push_back("heartbeat: no heartbeat history in the report");
    return f;
  }

  std::optional<Finding> oom_kill() const {
    const bool sigkill_like =
        sigkill() || (!in_.death.signaled && in_.death.exit_code == 137) || !in_.death.known;
    if (!sigkill_like) return std::nullopt;
    // The one place where an OOM kill is decided. The kernel log naming the kernel or one of
    // its own processes is proof; a rise of the cgroup's OOM-kill counter is, when the cgroup
    // holds the kernel alone (its own --memory-limit), when no log could say otherwise, or
    // when the log saw no kill of anything else meanwhile. (Reports written before this rule
    // carry the probe's own verdict in /oom_evidence/oom_killed and the counter's copy in
    // /oom_evidence/cgroup_oom_kill_delta; they are read as evidence too.)
    const auto cg_delta = std::max(v_.integer("/oom_evidence/cgroup_oom_kill_delta").value_or(0),
                                   v_.integer("/cgroup/oom_kill_delta").value_or(0));
    const auto kernel_pid = v_.integer("/kernel/pid");
    bool pid_named = false;
    for (const auto& p : v_.array("/oom_evidence/matched_pids"))
      if (kernel_pid && integer_of(p) == kernel_pid) pid_named = true;
    const bool log_says = !v_.array("/oom_evidence/matched_pids").empty();
    const bool log_readable = v_.flag("/oom_evidence/kernel_log_readable");
    const bool other_kills = v_.integer("/oom_evidence/other_oom_kills_seen").value_or(0) > 0;
    const bool counter_says =
        cg_delta > 0 && (v_.flag("/cgroup/created_by_watchdog") || !log_readable || !other_kills);
    const bool oom_killed = log_says || counter_says || v_.flag("/oom_evidence/oom_killed");
    // The line saying whom it killed, and the one saying why (the constraint).
    std::optional<std::size_t> killed_line, constraint_line;
    bool memcg = false, global = false;
    const auto& log = v_.array("/oom_evidence/kernel_log");
    for (std::size_t i = 0; i < log.size(); ++i) {
      if (!log[i].is_string()) continue;
      const auto& line = log[i].get_ref<const std::string&>();
      if (line.find("CONSTRAINT_MEMCG") != std::string::npos) memcg = true;
      if (line.find("CONSTRAINT_NONE") != std::string::npos) global = true;
      if (line.find("constraint=") != std::string::npos) constraint_line = i;
      if (line.find("Killed process") != std::string::npos) killed_line = i;
    }
    if (!oom_killed) return std::nullopt;

    Finding f;
    const bool cgroup = (cg_delta > 0 || memcg) && !global;
    f.cause = cgroup ? CauseId::oom_killed_cgroup : CauseId::oom_killed_system;
    f.confidence =
        log_says || pid_named || v_.flag("/cgroup/created_by_watchdog") ? "high" : "medium";
    termination(f);
    if (log_says)
      f.evidence.push_back({pid_named ? "the OOM killer's record names the kernel"
                                      : "the OOM killer's record names a process of the kernel",
                            "/oom_evidence/matched_pids"});
    if (cg_delta > 0) {
      const auto before = v_.integer("/cgroup/oom_kill_before");
      const auto after = v_.integer("/cgroup/oom_kill_after");
      std::string fact = "the cgroup's count of OOM kills (oom_kill) ";
      fact += before && after
                  ? "went from " + std::to_string(*before) + " to " + std::to_string(*after)
                  : "rose by " + std::to_string(cg_delta);
      f.evidence.push_back({fact, v_.has("/cgroup/oom_kill_delta")
                                      ? "/cgroup/oom_kill_delta"
                                      : "/oom_evidence/cgroup_oom_kill_delta"});
    }
    for (const auto& line : {killed_line, constraint_line})
      if (line)
        f.evidence.push_back({"kernel log: " + shorten(log[*line].get<std::string>(), 200),
                              "/oom_evidence/kernel_log/" + std::to_string(*line)});
    pressure(f, 0.0);
    cell(f);
    const std::string others = cgroup ? cgroup_neighbours(f) : std::string();
    if (cgroup && v_.flag("/cgroup/created_by_watchdog")) {
      // Our own --memory-limit: no container to blame, and the fix is in our options.
      std::string limit = "--memory-limit";
      if (auto l = v_.integer("/cgroup/limit"); l && *l > 0)
        limit += ", " + util::format_bytes(static_cast<double>(*l));
      f.evidence.push_back(
          {"the cgroup is the one kernel-watchdog made for this kernel alone, "
           "with its " +
               limit,
           "/cgroup/created_by_watchdog"});
      f.headline =
          "Killed by the OOM killer: the kernel reached the memory limit kernel-watchdog "
          "set for it (" +
          limit + ")" + cell_phrase();
    } else if (cgroup) {
      std::string limit;
      if (auto l = v_.integer("/cgroup/limit"); l && *l > 0)
        limit = " (" + util::format_bytes(static_cast<double>(*l)) + ")";
      f.headline = title(f) + limit + cell_phrase();
    } else {
      f.headline = title(f) + cell_phrase();
    }
    f.headline += others;
    return f;
  }

  // Other processes in the kernel's cgroup, which the limit counts too: as evidence, and
  // "; other processes in the cgroup held N" for the headline ("" when none held much).
  [[nodiscard]] std::string cgroup_neighbours(Finding& f) const {
    const auto& others = v_.array("/cgroup/other_processes");
    const auto limit = v_.integer("/cgroup/limit").value_or(0);
    std::int64_t held = 0;
    for (std::size_t i = 0; i < others.size(); ++i) {
      const ReportView p(others[i]);
      const auto rss = p.integer("/rss").value_or(0);
      if (rss <= 0) continue;
      held += rss;
      std::string fact =
          "the cgroup also held pid " + std::to_string(p.integer("/pid").value_or(0));
      if (auto cmd = p.text("/command_line"); cmd && !cmd->empty())
        fact += " (" + shorten(*cmd, 80) + ")";
      fact += ", not the kernel's, with " + util::format_bytes(static_cast<double>(rss)) + " RSS";
      if (limit > 0)
        fact += " (" + percent(static_cast<double>(rss) / static_cast<double>(limit)) +
                " of the limit)";
      f.evidence.push_back({fact, "/cgroup/other_processes/" + std::to_string(i)});
    }
    // Worth a headline when they held a real share of what the limit allows.
    if (held <= 0 || (limit > 0 && held * 10 < limit)) return "";
    return "; other processes in the cgroup held " + util::format_bytes(static_cast<double>(held)) +
           " of it";
  }

  std::optional<Finding> killed() const {
    if (!sigkill()) return std::nullopt;
    Finding f;
    f.cause = CauseId::killed;
    termination(f);
    const bool checked = v_.has("/oom_evidence");
    if (checked)
      f.evidence.push_back({"no OOM-kill record names the kernel", "/oom_evidence/matched_pids"});
    if (auto before = v_.integer("/cgroup/oom_kill_after"))
      f.evidence.push_back(
          {"the cgroup's count of OOM kills (oom_kill) stayed at " + std::to_string(*before),
           "/cgroup/oom_kill_after"});
    const bool near_limit = in_.pressure && in_.pressure->fraction() >= 0.9;
    pressure(f, 0.9);
    cell(f);
    if (!checked) {
      f.confidence = "low";
      f.headline = "Killed by SIGKILL" + cell_phrase() +
                   "; whether the OOM killer sent it could not be checked";
      f.missing.push_back(
          "oom_evidence: no OOM-kill record was available, so the kernel OOM killer is neither "
          "confirmed nor ruled out");
    } else if (near_limit) {
      f.confidence = "medium";
      f.headline = "Killed by SIGKILL" + cell_phrase() + " with memory at " +
                   percent(in_.pressure->fraction()) + " of the " + in_.pressure->limit_name +
                   "; no kernel OOM-kill record, so a user-space OOM daemon or job scheduler is "
                   "the likely sender";
    } else {
      f.confidence = "high";
      f.headline =
          "Killed by SIGKILL from outside the kernel" + cell_phrase() + "; not the OOM killer";
    }
    return f;
  }

  std::optional<Finding> gpu_fault() const {
    if (sigkill()) return std::nullopt;
    const auto& xids = in_.xid_events;
    const SignatureHit* h = in_.best_hit(CauseId::gpu_driver_fault);
    if (xids.empty() && h == nullptr) return std::nullopt;
    Finding f;
    f.cause = CauseId::gpu_driver_fault;
    f.confidence =
        !xids.empty() || (h->recent() && h->signature->strength == "strong") ? "high" : "medium";
    std::string what;
    for (const auto& x : xids) {
      f.evidence.push_back({x.fact(), x.pointer()});
      if (what.empty()) what = "NVIDIA Xid " + x.xid_text;
    }
    if (h != nullptr) {
      hit(f, *h);
      if (what.empty()) what = shorten(h->from_match, 90);
    }
    more_hits(f, CauseId::gpu_driver_fault, h);
    termination(f);
    traceback(f);
    cell(f);
    f.headline = title(f) + " (" + what + "); the kernel then " + how_it_died() + cell_phrase();
    if (!v_.has("/gpu"))
      f.missing.push_back("gpu: no GPU probe data (driver state, Xid events) in the report");
    return f;
  }

  // A device whose memory was (nearly) all in use while the kernel held some of it.
  [[nodiscard]] std::optional<Evidence> full_device() const {
    // Report data: any field may be null or of the wrong type (NOT_SUPPORTED answers, other
    // writers), so everything is read through the tolerant view.
    const auto kernel_pid = v_.integer("/kernel/pid");
    std::set<std::int64_t> our_devices;
    for (const auto& p : v_.array("/gpu/processes")) {
      const ReportView proc(p);
      if (kernel_pid && proc.integer("/pid") == kernel_pid)
        our_devices.insert(proc.integer("/device").value_or(0));
    }
    const auto& devices = v_.array("/gpu/devices");
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const ReportView d(devices[i]);
      const auto total = d.integer("/memory_total").value_or(0);
      const auto used = d.integer("/memory_used").value_or(0);
      const auto index = d.integer("/index").value_or(0);
      if (total <= 0 || !our_devices.contains(index)) continue;
      const double frac = static_cast<double>(used) / static_cast<double>(total);
      if (frac >= 0.97)
        return Evidence{"GPU " + std::to_string(index) + " (" + d.text("/name").value_or("?") +
                            ") had " + util::format_bytes(static_cast<double>(used)) + " of " +
                            util::format_bytes(static_cast<double>(total)) + " in use (" +
                            percent(frac) + "), some of it the kernel's",
                        "/gpu/devices/" + std::to_string(i)};
    }
    return std::nullopt;
  }

  // The framework's numbers and who else held the device, as evidence; "; other processes
  // held N of the device's M (pid P: command)" for the headline when they held a real share.
  [[nodiscard]] std::string gpu_neighbours(Finding& f) const {
    if (!in_.gpu_contention) return "";
    const auto& c = *in_.gpu_contention;
    const auto size = [](std::int64_t b) { return util::format_bytes(static_cast<double>(b)); };
    std::vector<std::string> said;
    if (c.requested) said.push_back("it asked for " + size(*c.requested));
    if (c.free && c.capacity)
      said.push_back(size(*c.free) + " of the device's " + size(*c.capacity) + " was free");
    if (c.kernel_held) said.push_back("the kernel held " + size(*c.kernel_held));
    if (!said.empty() && !c.message_pointer.empty()) {
      std::string fact = "the framework's own numbers: ";
      for (std::size_t i = 0; i < said.size(); ++i)
        fact += (i ? ", " : "") + said[i];
      f.evidence.push_back({fact, c.message_pointer, c.message_line});
    }
    constexpr std::size_t kNamed = 3;
    for (std::size_t i = 0; i < c.others.size() && i < kNamed; ++i) {
      const auto& o = c.others[i];
      std::string fact = o.label(80);
      fact += ", not the kernel's, held " + size(o.bytes) + " of GPU memory";
      if (!o.frameworks.empty()) {
        fact += "; it has loaded";
        for (const auto& fw : o.frameworks)
          fact += " " + fw;
      }
      f.evidence.push_back({fact, o.pointer});
    }
    if (!c.significant()) return "";
    std::string out = "; other processes held " + size(c.held);
    if (c.capacity) out += " of the device's " + size(*c.capacity);
    const auto& top = c.others.front();
    out += " (pid " + std::to_string(top.pid);
    if (!top.notebook.empty())
      out += ", the kernel of " + shorten(top.notebook, 50);
    else if (!top.command_line.empty())
      out += ": " + shorten(top.command_line, 50);
    return out + ")";
  }

  std::optional<Finding> gpu_oom() const {
    if (sigkill()) return std::nullopt;
    const SignatureHit* h = in_.best_hit(CauseId::gpu_out_of_memory);
    const auto device = full_device();
    // A full device alone explains an abort (a library that could not allocate and gave
    // up), not a segfault in unrelated code, which is context.
    const bool aborted = in_.death.signaled && in_.death.signal_name == "SIGABRT";
    if (h == nullptr && !(device && aborted)) return std::nullopt;
    Finding f;
    f.cause = CauseId::gpu_out_of_memory;
    if (h != nullptr) {
      const auto& strength = h->signature->strength;
      f.confidence = strength == "strong" && h->recent() ? "high"
                     : strength == "weak" && !device     ? "low"
                                                         : "medium";
      hit(f, *h);
    } else {
      f.confidence = "medium";
    }
    if (device) f.evidence.push_back(*device);
    const std::string others = gpu_neighbours(f);
    more_hits(f, CauseId::gpu_out_of_memory, h);
    termination(f);
    traceback(f);
    cell(f);
    const bool unified =
        h != nullptr && (h->signature->family == "mps" || h->signature->family == "mlx" ||
                         h->signature->family == "metal");
    f.headline = unified ? std::string("GPU (unified) memory exhausted") : title(f);
    if (h != nullptr) f.headline += " (" + shorten(h->from_match, 90) + ")";
    f.headline += others + "; the kernel then " + how_it_died() + cell_phrase();
    if (!v_.has("/gpu") && !unified)
      f.missing.push_back("gpu: no GPU probe data; device memory use at death is unknown");
    return f;
  }

  std::optional<Finding> native_crash() const {
    if (!in_.death.signaled || !kNativeCrashSignals.contains(in_.death.signal_name))
      return std::nullopt;
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
    const auto site = crash_site();
    if (site) f.headline += " in " + site->first;
    if (!site || site->first.find(" of cell [") == std::string::npos) f.headline += cell_phrase();
    if (!in_.traceback.is_object())
      f.missing.push_back(
          "python_traceback: no faulthandler dump in the stderr tail, so the Python line that "
          "called into native code is unknown (faulthandler off, or not a Python kernel)");
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
    cell(f);
    f.headline = title(f);
    if (reason != nullptr && reason->signature->id != "python.faulthandler_abort")
      f.headline += ": " + shorten(reason->from_match, 110);
    else if (auto site = crash_site(); site && site->first.find(" of cell [") != std::string::npos)
      f.headline += " in " + site->first;
    if (f.headline.find(" of cell [") == std::string::npos) f.headline += cell_phrase();
    if (reason == nullptr || reason->signature->id == "python.faulthandler_abort")
      f.missing.push_back(
          "stderr: no recognised message from the library that aborted (see the stderr tail)");
    if (!in_.traceback.is_object())
      f.missing.push_back("python_traceback: no faulthandler dump in the stderr tail");
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

  // The last error shown on IOPub came from a cell the kernel went on from.
  [[nodiscard]] std::optional<std::int64_t> last_error_survived_until() const {
    const auto count = v_.integer("/execution/last_error/execution_count");
    if (!count) return std::nullopt;
    std::optional<std::int64_t> until;
    for (const auto& c : v_.array("/execution/last_cells")) {
      if (!c.is_object()) continue;
      const ReportView cell(c);
      const auto status = cell.text("/status").value_or("");
      const auto n = cell.integer("/execution_count");
      if (n && *n > *count && (status == "ok" || status == "error")) until = n;
    }
    return until;
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
