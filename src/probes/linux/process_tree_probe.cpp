#include "kwd/probes/linux/process_tree_probe.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "kwd/probes/linux/procfs.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::probes::linux_proc {
namespace {

std::string pid_path(const std::string& proc, pid_t pid, const char* leaf) {
  return proc + "/" + std::to_string(pid) + "/" + leaf;
}

}  // namespace

ProcessTreeProbe::ProcessTreeProbe(const ProbeOptions& options, std::string proc_root)
    : root_(options.kernel_pid),
      proc_(std::move(proc_root)),
      page_size_(::sysconf(_SC_PAGESIZE)),
      rescan_interval_ms_(options.tree_rescan_interval.count()),
      slow_interval_ms_(options.slow_interval.count()),
      loadavg_fd_(::open((proc_ + "/loadavg").c_str(), O_RDONLY | O_CLOEXEC)) {
  Member root;
  if (!read_stat(root_, root)) {
    available_ = false;
    reason_ = "cannot read " + pid_path(proc_, root_, "stat");
    return;
  }
  members_.emplace(root_, std::move(root));
  reason_ = "procfs: RSS/threads at full rate, swap/PSS every " +
            std::to_string(slow_interval_ms_) + " ms";
}

ProbeStatus ProcessTreeProbe::status() const {
  return {"linux.process_tree", available_, reason_};
}

bool ProcessTreeProbe::read_stat(pid_t pid, Member& m) {
  if (!m.stat_fd) {
    m.stat_fd.reset(::open(pid_path(proc_, pid, "stat").c_str(), O_RDONLY | O_CLOEXEC));
    if (!m.stat_fd) return false;
  }
  static thread_local std::string buf;
  const auto text = pread_all(m.stat_fd.get(), buf);
  if (!text) return false;
  const auto st = parse_proc_stat(*text);
  if (!st || st->state == 'Z' || st->state == 'X') return false;
  if (m.start_time == 0) {
    m.start_time = st->start_time;
    m.comm = st->comm;
  } else if (m.start_time != st->start_time) {
    return false;  // the pid was reused by an unrelated process
  }
  m.rss = st->rss_pages * page_size_;
  m.peak_rss = std::max(m.peak_rss, m.rss);
  m.threads = st->threads;
  return true;
}

void ProcessTreeProbe::read_slow(pid_t pid, Member& m) {
  if (const auto status = read_small_file(pid_path(proc_, pid, "status")))
    m.swap = find_kb_field(*status, "VmSwap").value_or(0);
  if (const auto rollup = read_small_file(pid_path(proc_, pid, "smaps_rollup")))
    m.pss = find_kb_field(*rollup, "Pss").value_or(-1);
}

void ProcessTreeProbe::rescan_if_needed(std::int64_t now_ms) {
  if (last_rescan_ms_ >= 0 && now_ms - last_rescan_ms_ < rescan_interval_ms_) return;
  // /proc/loadavg's last field is the most recently created pid: unchanged means no process
  // was created anywhere since the last scan, so the tree cannot have gained a member.
  static thread_local std::string buf;
  std::string newest;
  if (loadavg_fd_) {
    if (const auto text = pread_all(loadavg_fd_.get(), buf)) {
      const auto sp = text->rfind(' ');
      newest = std::string(text->substr(sp == std::string_view::npos ? 0 : sp + 1));
    }
  }
  last_rescan_ms_ = now_ms;
  if (!newest.empty() && newest == last_created_pid_) return;
  last_created_pid_ = newest;
  rescan();
}

void ProcessTreeProbe::rescan() {
  std::unordered_map<pid_t, std::vector<pid_t>> children;
  DIR* dir = ::opendir(proc_.c_str());
  if (dir == nullptr) return;
  while (const dirent* e = ::readdir(dir)) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
    const auto text = read_small_file(pid_path(proc_, pid, "stat"));
    if (!text) continue;
    if (const auto st = parse_proc_stat(*text)) children[st->ppid].push_back(pid);
  }
  ::closedir(dir);
  std::vector<pid_t> frontier{root_};
  std::unordered_set<pid_t> seen{root_};
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    for (pid_t child : children[parent]) {
      if (!seen.insert(child).second) continue;
      frontier.push_back(child);
      if (!members_.contains(child)) {
        Member m;
        if (read_stat(child, m)) members_.emplace(child, std::move(m));
      }
    }
  }
}

void ProcessTreeProbe::sample(timeline::MemorySample& into) {
  if (!available_) return;
  const std::int64_t now = util::steady_ms();
  rescan_if_needed(now);
  const bool slow_due = last_slow_ms_ < 0 || now - last_slow_ms_ >= slow_interval_ms_;
  if (slow_due) last_slow_ms_ = now;

  std::int64_t rss = 0, swap = 0, pss = 0, threads = 0;
  bool pss_known = true;
  for (auto it = members_.begin(); it != members_.end();) {
    Member& m = it->second;
    if (!read_stat(it->first, m)) {
      if (it->first != root_) departed_[it->first] = m.comm;
      it = members_.erase(it);
      continue;
    }
    if (slow_due) read_slow(it->first, m);
    rss += m.rss;
    swap += m.swap;
    threads += m.threads;
    if (m.pss < 0)
      pss_known = false;
    else
      pss += m.pss;
    ++it;
  }
  if (members_.empty()) return;  // the kernel is gone: leave the fields unknown
  into.rss = rss;
  into.swap = swap;
  into.pss = pss_known ? pss : timeline::kUnknown;
  into.processes = static_cast<std::int64_t>(members_.size());
  into.threads = threads;
}

std::vector<pid_t> ProcessTreeProbe::members() const {
  std::vector<pid_t> out;
  for (const auto& [pid, m] : members_)
    out.push_back(pid);
  std::sort(out.begin(), out.end());
  return out;
}

void ProcessTreeProbe::contribute(nlohmann::json& report) const {
  auto& tree = report["process_tree"];
  tree["root_pid"] = root_;
  auto& list = tree["members"] = nlohmann::json::array();
  for (pid_t pid : members()) {
    const Member& m = members_.at(pid);
    list.push_back({{"pid", pid},
                    {"comm", m.comm},
                    {"rss", m.rss},
                    {"peak_rss", m.peak_rss},
                    {"swap", m.swap},
                    {"threads", m.threads}});
    if (m.pss >= 0) list.back()["pss"] = m.pss;
  }
  auto& gone = tree["departed"] = nlohmann::json::array();
  for (const auto& [pid, comm] : departed_)
    gone.push_back({{"pid", pid}, {"comm", comm}});
}

}  // namespace kwd::probes::linux_proc
