#include "kwd/platform/linux/kernel_cgroup.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "kwd/platform/linux/cgroup_fs.hpp"
#include "kwd/platform/linux/procfs.hpp"
#include "kwd/util/errno_text.hpp"
#include "kwd/util/process_exists.hpp"
#include "kwd/util/unique_dir.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::platform::linux_cgroup {
namespace {

using linux_proc::read_small_file;

constexpr std::string_view kPrefix = "kernel-watchdog-";

// Writes `text` to a cgroup control file; returns errno (0 on success).
int write_control(const std::string& path, std::string_view text) {
  util::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return errno;
  const ssize_t n = ::write(fd.get(), text.data(), text.size());
  if (n < 0) return errno;
  return static_cast<std::size_t>(n) == text.size() ? 0 : EIO;
}

bool has_word(std::string_view list, std::string_view word) {
  std::size_t pos = 0;
  while (pos < list.size()) {
    while (pos < list.size() && (list[pos] == ' ' || list[pos] == '\n'))
      ++pos;
    const std::size_t end = list.find_first_of(" \n", pos);
    if (list.substr(pos, end == std::string_view::npos ? list.size() - pos : end - pos) == word)
      return true;
    if (end == std::string_view::npos) break;
    pos = end;
  }
  return false;
}

std::vector<pid_t> pids_in(const std::string& dir) {
  std::vector<pid_t> pids;
  const auto text = read_small_file(dir + "/cgroup.procs");
  if (!text) return pids;
  std::size_t pos = 0;
  while (pos < text->size()) {
    const std::size_t eol = text->find('\n', pos);
    const std::string_view line(text->data() + pos,
                                (eol == std::string::npos ? text->size() : eol) - pos);
    pid_t pid = 0;
    if (std::from_chars(line.data(), line.data() + line.size(), pid).ec == std::errc() && pid > 0)
      pids.push_back(pid);
    if (eol == std::string::npos) break;
    pos = eol + 1;
  }
  return pids;
}

std::string errno_text(int err) {
  return std::strerror(err);
}

// Our own memory cgroup's directory and version.
struct Own {
  int version;
  std::string dir;
};

Own own_memory_cgroup(const std::string& proc_root) {
  using namespace linux_proc;
  const auto mountinfo = read_small_file(proc_root + "/self/mountinfo");
  if (!mountinfo) throw CgroupError(util::cannot("read", proc_root + "/self/mountinfo", errno));
  const auto membership = read_small_file(proc_root + "/self/cgroup");
  if (!membership) throw CgroupError(util::cannot("read", proc_root + "/self/cgroup", errno));
  const auto mounts = parse_cgroup_mounts(*mountinfo);
  const auto where = parse_proc_cgroup(*membership);
  if (mounts.v2 && where.v2) {
    const auto dir = cgroup_dir(*mounts.v2, *where.v2);
    const auto controllers = dir ? read_small_file(*dir + "/cgroup.controllers") : std::nullopt;
    if (dir && controllers && has_word(*controllers, "memory")) return {2, *dir};
  }
  if (mounts.v1_memory && where.v1_memory) {
    if (const auto dir = cgroup_dir(*mounts.v1_memory, *where.v1_memory)) return {1, *dir};
    throw CgroupError("the memory cgroup " + *where.v1_memory + " is outside what is mounted at " +
                      mounts.v1_memory->mount_point);
  }
  throw CgroupError(
      "no memory cgroup controller is available to this process (neither cgroup v2 with "
      "\"memory\" in cgroup.controllers nor a cgroup v1 memory hierarchy is mounted)");
}

// v2: children get memory.max only if the parent delegates the controller to them.
void delegate_memory_v2(const std::string& parent) {
  const auto subtree = read_small_file(parent + "/cgroup.subtree_control");
  if (subtree && has_word(*subtree, "memory")) return;
  const int err = write_control(parent + "/cgroup.subtree_control", "+memory");
  if (err == 0) return;
  if (err == EBUSY)
    throw CgroupError(
        "cgroup v2: cannot enable the memory controller for children of " + parent +
        " because processes live in it (the no-internal-processes rule); start the watchdog in "
        "a cgroup of its own, e.g. `systemd-run --user --scope -p Delegate=yes ...`");
  throw CgroupError("cgroup v2: cannot enable the memory controller in " + parent +
                    "/cgroup.subtree_control: " + errno_text(err));
}

}  // namespace

KernelCgroup KernelCgroup::create(std::uint64_t limit_bytes, const std::string& proc_root) {
  if (limit_bytes < 4096) throw CgroupError("a memory limit below one page is not a limit");
  const Own own = own_memory_cgroup(proc_root);
  sweep_stale_cgroups(own.dir);
  if (own.version == 2) delegate_memory_v2(own.dir);

  const std::string dir = own.dir + "/" + std::string(kPrefix) + std::to_string(::getpid());
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    const int err = errno;
    throw CgroupError("cannot create the memory cgroup " + dir + ": " + errno_text(err) +
                      (err == EACCES || err == EPERM || err == EROFS
                           ? " (this user may not write to the cgroup hierarchy there)"
                           : ""));
  }
  KernelCgroup cg(own.version, dir, limit_bytes);  // removes the directory if we throw below
  const std::string limit = std::to_string(limit_bytes);
  if (own.version == 2) {
    if (const int err = write_control(dir + "/memory.max", limit))
      throw CgroupError("cannot set " + dir + "/memory.max: " + errno_text(err));
    write_control(dir + "/memory.swap.max", "0");  // absent without swap accounting: fine
  } else {
    if (const int err = write_control(dir + "/memory.limit_in_bytes", limit))
      throw CgroupError("cannot set " + dir + "/memory.limit_in_bytes: " + errno_text(err));
    write_control(dir + "/memory.memsw.limit_in_bytes", limit);  // needs swapaccount=1
  }
  return cg;
}

KernelCgroup::KernelCgroup(KernelCgroup&& other) noexcept
    : version_(other.version_), dir_(std::move(other.dir_)), limit_(other.limit_) {
  other.dir_.clear();
}

KernelCgroup& KernelCgroup::operator=(KernelCgroup&& other) noexcept {
  if (this != &other) {
    remove();
    version_ = other.version_;
    dir_ = std::move(other.dir_);
    limit_ = other.limit_;
    other.dir_.clear();
  }
  return *this;
}

KernelCgroup::~KernelCgroup() {
  remove();
}

void KernelCgroup::add(pid_t pid) const {
  if (const int err = write_control(procs_file(), std::to_string(pid)))
    throw CgroupError("cannot move pid " + std::to_string(pid) + " into " + dir_ + ": " +
                      errno_text(err));
}

std::string KernelCgroup::remove() {
  if (dir_.empty()) return {};
  using namespace std::chrono_literals;
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  for (;;) {
    const auto left = pids_in(dir_);
    if (left.empty() && ::rmdir(dir_.c_str()) == 0) break;
    if (left.empty() && errno == ENOENT) break;
    if (std::chrono::steady_clock::now() > deadline) {
      const std::string problem =
          "could not remove " + dir_ + ": " +
          (left.empty() ? errno_text(errno)
                        : std::to_string(left.size()) + " process(es) still in it");
      dir_.clear();
      return problem;
    }
    // The kernel is dead; what is left are its orphans. v2 kills them all at once.
    if (!left.empty() && (version_ != 2 || write_control(dir_ + "/cgroup.kill", "1") != 0))
      for (pid_t pid : left)
        ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(5ms);
  }
  dir_.clear();
  return {};
}

int sweep_stale_cgroups(const std::string& parent_dir) {
  const util::UniqueDir dir(::opendir(parent_dir.c_str()));
  if (!dir) return 0;
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(dir.get())) {
    const std::string_view name(e->d_name);
    const auto pid = util::pid_after_prefix(name, kPrefix);
    if (!pid || *pid <= 0 || *pid == ::getpid() || util::process_exists(*pid)) continue;
    stale.emplace_back(name);
  }
  int removed = 0;
  for (const auto& name : stale) {
    const std::string path = parent_dir + "/" + name;
    if (pids_in(path).empty() && ::rmdir(path.c_str()) == 0) ++removed;
  }
  return removed;
}

}  // namespace kwd::platform::linux_cgroup
