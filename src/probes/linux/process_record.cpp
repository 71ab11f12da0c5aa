#include "kwd/probes/process_record.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>

#include "kwd/platform/linux/procfs.hpp"
#include "kwd/util/process_args.hpp"

namespace kwd::probes {
namespace {

constexpr std::size_t kMaxArgsBytes = std::size_t{1} << 20;

std::string read_at(int dir_fd, const char* name) {
  util::UniqueFd fd(::openat(dir_fd, name, O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n <= 0 || out.size() > kMaxArgsBytes) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

}  // namespace

std::optional<ProcessRecord> ProcessRecord::open(pid_t pid) {
  ProcessRecord record(pid);
  const std::string dir = "/proc/" + std::to_string(pid);
  record.dir_ = util::UniqueFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!record.dir_) return std::nullopt;
  struct stat st {};
  if (::fstat(record.dir_.get(), &st) != 0) return std::nullopt;
  record.owner_ = st.st_uid;
  return record;
}

std::vector<std::string> ProcessRecord::argv() const {
  return util::split_nul(read_at(dir_.get(), "cmdline"));
}

std::vector<std::string> ProcessRecord::environment() const {
  return util::split_nul(read_at(dir_.get(), "environ"));
}

std::optional<ProcessRecord::Lineage> ProcessRecord::lineage() const {
  const auto stat = platform::linux_proc::parse_proc_stat(read_at(dir_.get(), "stat"));
  if (!stat) return std::nullopt;
  constexpr std::uint32_t kForkNoExec = 0x40;  // PF_FORKNOEXEC, include/linux/sched.h
  return Lineage{stat->ppid, stat->start_time, (stat->flags & kForkNoExec) != 0,
                 platform::linux_proc::started_at_ms(stat->start_time)};
}

std::filesystem::path ProcessRecord::cwd() const {
  char buf[4096];
  const ssize_t n = ::readlinkat(dir_.get(), "cwd", buf, sizeof buf);
  if (n <= 0 || static_cast<std::size_t>(n) >= sizeof buf) return {};
  return std::string(buf, static_cast<std::size_t>(n));
}

std::vector<pid_t> list_processes() {
  return platform::linux_proc::list_pids();
}

}  // namespace kwd::probes
