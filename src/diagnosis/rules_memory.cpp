#include <algorithm>
#include <cmath>

#include "kwd/diagnosis/rule_context.hpp"
#include "kwd/diagnosis/worker_oom.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::diagnosis {
namespace {

using nlohmann::json;

class MemoryRules : public RuleContext {
 public:
  using RuleContext::RuleContext;

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
    if (!oom_killed) return thrash_ended();

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
    const auto taken_first = killed_before_kernel(v_);
    for (const auto& victim : taken_first)
      f.evidence.push_back({"the OOM killer took the kernel's process " +
                                std::to_string(victim.pid) + " (" + victim.command +
                                ") first, then the kernel",
                            "/oom_evidence/kernel_log/" + std::to_string(victim.log_line)});
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
      const std::string limit = own_limit(f);
      f.headline =
          "Killed by the OOM killer: the kernel reached the memory limit kernel-watchdog "
          "set for it (" +
          limit + ")" + cell_phrase();
    } else if (cgroup) {
      std::string limit;
      if (auto l = v_.integer("/cgroup/limit"); l && *l > 0)
        limit = " (" + util::format_bytes(static_cast<double>(*l)) + ")";
      f.headline = title(f) + limit + container_phrase(f) + cell_phrase();
    } else {
      f.headline = title(f) + cell_phrase();
    }
    f.headline += taken_first_phrase(taken_first) + others;
    return f;
  }

  // The watchdog's thrash guard ended the kernel at its --memory-limit (launch/watched_kernel,
  // watch/thrash_guard.hpp): the limit killed it, by our hand instead of the OOM killer's.
  std::optional<Finding> thrash_ended() const {
    // The SIGKILL sent, and the one the kernel died of: a kernel that had died already of
    // something else (a segfault not yet reaped) is that death's.
    if (!v_.flag("/memory_thrash/ended_by_watchdog") || !v_.flag("/cgroup/created_by_watchdog") ||
        !sigkill())
      return std::nullopt;
    Finding f;
    f.cause = CauseId::oom_killed_cgroup;
    f.confidence = "high";
    termination(f);
    const auto seconds = v_.number("/memory_thrash/seconds").value_or(0);
    const auto per_second = v_.number("/memory_thrash/refaults_per_second").value_or(0);
    const auto cache = v_.integer("/memory_thrash/most_file_cache_bytes").value_or(0);
    const auto timeout = v_.integer("/memory_thrash/thrash_timeout_s").value_or(0);
    const std::string spell = std::to_string(std::lround(seconds)) + " s";
    f.evidence.push_back(
        {"for " + spell + " the kernel's memory cgroup stayed at its limit with at most " +
             util::format_bytes(static_cast<double>(cache)) + " of page cache left, and read " +
             std::to_string(std::lround(per_second)) +
             " evicted pages a second back from disk: the code and files it runs, evicted by "
             "reclaim and read again, so the OOM killer never fired",
         "/memory_thrash"});
    f.evidence.push_back({"kernel-watchdog ended it with SIGKILL after its --thrash-timeout of " +
                              std::to_string(timeout) + " s",
                          "/memory_thrash/ended_by_watchdog"});
    const std::string limit = own_limit(f);
    cell(f);
    f.headline =
        "Ended by kernel-watchdog: the kernel filled the memory limit kernel-watchdog "
        "set for it (" +
        limit + ") and thrashed there for " + spell + ", the OOM killer not firing" + cell_phrase();
    return f;
  }

  // The cgroup kernel-watchdog made for the kernel, as evidence; "--memory-limit, 1.5 GiB"
  // for the headline.
  std::string own_limit(Finding& f) const {
    std::string limit = "--memory-limit";
    if (auto l = v_.integer("/cgroup/limit"); l && *l > 0)
      limit += ", " + util::format_bytes(static_cast<double>(*l));
    f.evidence.push_back(
        {"the cgroup is the one kernel-watchdog made for this kernel alone, with its " + limit,
         "/cgroup/created_by_watchdog"});
    return limit;
  }

  // ", after the OOM killer had taken its DataLoader worker (pid 2330) first".
  [[nodiscard]] std::string taken_first_phrase(const std::vector<OomVictim>& first) const {
    if (first.empty()) return "";
    const auto& victim = first.front();
    const std::string pid = std::to_string(victim.pid);
    std::string who = in_.loaded("torch") && cell_uses_dataloader(v_)
                          ? "its DataLoader worker (pid " + pid + ")"
                          : "its process " + pid + " (" + victim.command + ")";
    if (first.size() > 1) who += " and " + std::to_string(first.size() - 1) + " more";
    return ", after the OOM killer had taken " + who + " first";
  }

  // On a Kubernetes node (the daemon's "kubernetes" section): the container's and the pod's
  // limits and whether the whole container went with the kernel, as evidence; " in container
  // C of pod NS/POD" for the headline.
  [[nodiscard]] std::string container_phrase(Finding& f) const {
    if (!v_.has("/kubernetes/container_id")) return "";
    std::string container = v_.text("/kubernetes/container").value_or("");
    if (container.empty())
      container = v_.text("/kubernetes/container_id").value_or("").substr(0, 12);
    std::string pod = v_.text("/kubernetes/pod").value_or("");
    if (pod.empty()) pod = "with UID " + v_.text("/kubernetes/pod_uid").value_or("?");
    if (const auto ns = v_.text("/kubernetes/namespace");
        ns && !v_.text("/kubernetes/pod").value_or("").empty())
      pod = *ns + "/" + pod;
    const std::string who = "container " + container + " of pod " + pod;
    if (auto l = v_.integer("/kubernetes/memory/container_limit"); l && *l > 0)
      f.evidence.push_back(
          {who + " has a memory limit of " + util::format_bytes(static_cast<double>(*l)),
           "/kubernetes/memory/container_limit"});
    if (auto l = v_.integer("/kubernetes/memory/pod_limit"); l && *l > 0)
      f.evidence.push_back({"the pod's memory limit (all its containers together) is " +
                                util::format_bytes(static_cast<double>(*l)),
                            "/kubernetes/memory/pod_limit"});
    if (v_.flag("/kubernetes/memory/group_killed"))
      f.evidence.push_back(
          {"the container's cgroup kills as a group (memory.oom.group): the OOM "
           "killer ended every process of the container, the kernel with them",
           "/kubernetes/memory/group_killed"});
    else if (v_.flag("/kubernetes/memory/container_emptied"))
      f.evidence.push_back(
          {"no process of the container was left after the kill: the container "
           "ended with the kernel",
           "/kubernetes/memory/container_emptied"});
    return " in " + who;
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
};

}  // namespace

std::optional<Finding> oom_kill_rule(const DiagnosisInput& input) {
  return MemoryRules(input).oom_kill();
}

std::optional<Finding> sigkill_rule(const DiagnosisInput& input) {
  return MemoryRules(input).killed();
}

}  // namespace kwd::diagnosis
