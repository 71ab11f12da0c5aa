// Unbuilt here (see README.md): written to <libproc.h>, <sys/proc_info.h> and <sys/sysctl.h>
// as documented. The KERN_PROCARGS2 layout is parsed by util::parse_kern_procargs2, which the
// Linux unit tests cover.
#include "kwd/probes/process_record.hpp"

#include <libproc.h>
#include <sys/proc_info.h>
#include <sys/sysctl.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "kwd/util/process_args.hpp"

namespace kwd::probes {
namespace {

std::optional<proc_bsdinfo> bsd_info(pid_t pid) {
  proc_bsdinfo info{};
  const int size = static_cast<int>(sizeof info);
  if (::proc_pidinfo(pid, PROC_PIDTBSDINFO, 0, &info, size) != size) return std::nullopt;
  return info;
}

std::uint64_t start_time_of(const proc_bsdinfo& info) {
  return info.pbi_start_tvsec * 1'000'000 + info.pbi_start_tvusec;  // microseconds
}

// The process's arguments and environment; nullopt for another user's process (the kernel
// refuses) or one that is gone.
std::optional<util::ProcessArgs> process_args(pid_t pid) {
  // The kernel wants a buffer of exactly KERN_ARGMAX bytes (EINVAL when larger): asked once,
  // and a buffer kept per thread (a scan reads a process and its parent), not allocated each
  // time.
  static const int argmax = [] {
    int value = 0;
    std::size_t size = sizeof value;
    int mib[] = {CTL_KERN, KERN_ARGMAX};
    return ::sysctl(mib, 2, &value, &size, nullptr, 0) == 0 ? value : 0;
  }();
  if (argmax <= 0) return std::nullopt;
  thread_local std::vector<char> buffer(static_cast<std::size_t>(argmax));
  std::size_t size = buffer.size();
  int mib[] = {CTL_KERN, KERN_PROCARGS2, static_cast<int>(pid)};
  if (::sysctl(mib, 3, buffer.data(), &size, nullptr, 0) != 0) return std::nullopt;
  return util::parse_kern_procargs2(std::string_view(buffer.data(), size));
}

}  // namespace

std::optional<ProcessRecord> ProcessRecord::open(pid_t pid) {
  const auto info = bsd_info(pid);
  if (!info) return std::nullopt;
  ProcessRecord record(pid);
  record.owner_ = info->pbi_uid;
  record.opened_ = {static_cast<pid_t>(info->pbi_ppid), start_time_of(*info)};
  return record;
}

std::vector<std::string> ProcessRecord::argv() const {
  auto args = process_args(pid_);
  if (!args || !lineage()) return {};
  return std::move(args->argv);
}

std::vector<std::string> ProcessRecord::environment() const {
  auto args = process_args(pid_);
  if (!args || !lineage()) return {};
  return std::move(args->environment);
}

std::optional<ProcessRecord::Lineage> ProcessRecord::lineage() const {
  const auto info = bsd_info(pid_);
  if (!info || start_time_of(*info) != opened_.start_time) return std::nullopt;  // reused
  return Lineage{static_cast<pid_t>(info->pbi_ppid), opened_.start_time, false,
                 static_cast<std::int64_t>(opened_.start_time / 1000)};
}

std::filesystem::path ProcessRecord::cwd() const {
  proc_vnodepathinfo info{};
  const int size = static_cast<int>(sizeof info);
  if (::proc_pidinfo(pid_, PROC_PIDVNODEPATHINFO, 0, &info, size) != size || !lineage()) return {};
  return std::string(info.pvi_cdir.vip_path);
}

std::vector<pid_t> list_processes() {
  // Asked for its size first; processes started in between are left to the next scan.
  const int count = ::proc_listallpids(nullptr, 0);
  if (count <= 0) return {};
  std::vector<pid_t> pids(static_cast<std::size_t>(count) + 64);
  const int found = ::proc_listallpids(pids.data(), static_cast<int>(pids.size() * sizeof(pid_t)));
  if (found <= 0) return {};
  pids.resize(std::min(pids.size(), static_cast<std::size_t>(found)));
  std::erase(pids, 0);  // the kernel_task: not a process we could read, and Linux lists none
  return pids;
}

}  // namespace kwd::probes
