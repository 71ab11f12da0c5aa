#include "kwd/platform/linux/cgroup_fs.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <charconv>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kwd/platform/linux/procfs.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::platform::linux_proc {
namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t next = s.find(sep, pos);
    out.push_back(s.substr(pos, next == std::string_view::npos ? s.size() - pos : next - pos));
    if (next == std::string_view::npos) break;
    pos = next + 1;
  }
  return out;
}

template <typename F>
void for_each_line(std::string_view text, F&& f) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t eol = text.find('\n', pos);
    f(text.substr(pos, eol == std::string_view::npos ? text.size() - pos : eol - pos));
    if (eol == std::string_view::npos) break;
    pos = eol + 1;
  }
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_octal(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 4 <= s.size()) {
      const auto oct = s.substr(i + 1, 3);
      int v = 0;
      const auto [end, ec] = std::from_chars(oct.data(), oct.data() + 3, v, 8);
      if (ec == std::errc() && end == oct.data() + 3) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

bool has_token(std::string_view list, std::string_view token, char sep) {
  for (auto t : split(list, sep))
    if (t == token) return true;
  return false;
}

bool exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

// The mount table of each proc root, parsed once and read again only when the kernel says it
// changed: an open mountinfo polls POLLPRI after any mount or unmount in its namespace. The
// daemon makes probes for hundreds of kernels at once (a server restoring its sessions), and
// each asked for the table three times. A proc root that is not procfs (a directory of text
// files, as tests make) is read every time.
class MountTables {
 public:
  std::optional<CgroupMounts> get(const std::string& proc_root) {
    const std::lock_guard lock(mutex_);
    Table& table = tables_[proc_root];
    if (!table.mountinfo) {
      table.mountinfo.reset(::open((proc_root + "/self/mountinfo").c_str(), O_RDONLY | O_CLOEXEC));
      if (!table.mountinfo) return std::nullopt;
      struct statfs fs {};
      if (::fstatfs(table.mountinfo.get(), &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC) {
        table.mountinfo.reset();
        const auto text = read_small_file(proc_root + "/self/mountinfo");
        if (!text) return std::nullopt;
        return parse_cgroup_mounts(*text);
      }
    }
    // Polling takes the change flag down: looked at before the read, so a change during the
    // read shows at the next look.
    pollfd changed{table.mountinfo.get(), POLLPRI, 0};
    const int flagged = ::poll(&changed, 1, 0);
    if (table.mounts && flagged == 0) return table.mounts;
    const auto text = pread_to_end(table.mountinfo.get(), buffer_);
    if (!text) {
      tables_.erase(proc_root);
      return std::nullopt;
    }
    table.mounts = parse_cgroup_mounts(*text);
    return table.mounts;
  }

 private:
  struct Table {
    util::UniqueFd mountinfo;
    std::optional<CgroupMounts> mounts;
  };
  std::mutex mutex_;
  std::unordered_map<std::string, Table> tables_;
  std::string buffer_;
};

}  // namespace

std::optional<CgroupMounts> cgroup_mounts(const std::string& proc_root) {
  static MountTables tables;
  return tables.get(proc_root);
}

CgroupMounts parse_cgroup_mounts(std::string_view mountinfo) {
  CgroupMounts mounts;
  for_each_line(mountinfo, [&](std::string_view line) {
    // id parent major:minor root mount_point options [optional...] - fstype source super_options
    const auto dash = line.find(" - ");
    if (dash == std::string_view::npos) return;
    const auto head = split(line.substr(0, dash), ' ');
    const auto tail = split(line.substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3) return;
    CgroupMount m{unescape_octal(head[3]), unescape_octal(head[4])};
    if (tail[0] == "cgroup2" && !mounts.v2)
      mounts.v2 = std::move(m);
    else if (tail[0] == "cgroup" && has_token(tail[2], "memory", ',') && !mounts.v1_memory)
      mounts.v1_memory = std::move(m);
  });
  return mounts;
}

CgroupMembership parse_proc_cgroup(std::string_view text) {
  CgroupMembership member;
  for_each_line(text, [&](std::string_view line) {
    // hierarchy-id:controllers:path (the path may itself hold ':')
    const auto c1 = line.find(':');
    if (c1 == std::string_view::npos) return;
    const auto c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) return;
    const auto id = line.substr(0, c1);
    const auto controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string path(line.substr(c2 + 1));
    if (id == "0" && controllers.empty())
      member.v2 = path;
    else if (has_token(controllers, "memory", ','))
      member.v1_memory = path;
  });
  return member;
}

std::optional<std::string> cgroup_dir(const CgroupMount& mount, std::string_view path) {
  std::string_view rel = path;
  if (mount.root != "/") {
    if (!rel.starts_with(mount.root)) return std::nullopt;
    rel.remove_prefix(mount.root.size());
    if (!rel.empty() && rel.front() != '/') return std::nullopt;
  }
  while (!rel.empty() && rel.front() == '/')
    rel.remove_prefix(1);
  std::string dir = mount.mount_point;
  if (!rel.empty()) dir += "/" + std::string(rel);
  return dir;
}

std::optional<MemoryCgroup> memory_cgroup_of(pid_t pid, const std::string& proc_root) {
  const auto table = cgroup_mounts(proc_root);
  const auto membership = read_small_file(proc_root + "/" + std::to_string(pid) + "/cgroup");
  if (!table || !membership) return std::nullopt;
  const CgroupMounts& mounts = *table;
  const auto where = parse_proc_cgroup(*membership);
  if (mounts.v2 && where.v2) {
    // memory.current exists only where the parent enabled the memory controller.
    if (auto dir = cgroup_dir(*mounts.v2, *where.v2); dir && exists(*dir + "/memory.current"))
      return MemoryCgroup{2, *where.v2, *dir, mounts.v2->mount_point};
  }
  if (mounts.v1_memory && where.v1_memory) {
    if (auto dir = cgroup_dir(*mounts.v1_memory, *where.v1_memory);
        dir && exists(*dir + "/memory.usage_in_bytes"))
      return MemoryCgroup{1, *where.v1_memory, *dir, mounts.v1_memory->mount_point};
  }
  return std::nullopt;
}

std::optional<MemoryCgroup> memory_cgroup_at(const std::string& dir, const std::string& proc_root) {
  const auto table = cgroup_mounts(proc_root);
  if (!table) return std::nullopt;
  const CgroupMounts& mounts = *table;
  const auto relative = [&](const CgroupMount& m) -> std::optional<std::string> {
    if (dir != m.mount_point && !dir.starts_with(m.mount_point + "/")) return std::nullopt;
    std::string rest = dir.substr(m.mount_point.size());
    std::string root = m.root == "/" ? "" : m.root;
    return rest.empty() && root.empty() ? "/" : root + rest;
  };
  if (mounts.v2 && exists(dir + "/memory.current"))
    if (auto path = relative(*mounts.v2))
      return MemoryCgroup{2, *path, dir, mounts.v2->mount_point};
  if (mounts.v1_memory && exists(dir + "/memory.usage_in_bytes"))
    if (auto path = relative(*mounts.v1_memory))
      return MemoryCgroup{1, *path, dir, mounts.v1_memory->mount_point};
  return std::nullopt;
}

std::optional<std::string> unified_dir_of(pid_t pid, const std::string& proc_root) {
  const auto table = cgroup_mounts(proc_root);
  const auto membership = read_small_file(proc_root + "/" + std::to_string(pid) + "/cgroup");
  if (!table || !membership) return std::nullopt;
  const CgroupMounts& mounts = *table;
  const auto where = parse_proc_cgroup(*membership);
  if (!mounts.v2 || !where.v2) return std::nullopt;
  return cgroup_dir(*mounts.v2, *where.v2);
}

std::vector<std::string> limiting_dirs(const MemoryCgroup& cgroup) {
  std::vector<std::string> out;
  for (std::string dir = cgroup.dir;;) {
    out.push_back(dir);
    if (dir == cgroup.top_dir || dir.size() <= cgroup.top_dir.size()) break;
    const auto slash = dir.rfind('/');
    dir = slash == std::string::npos || slash == 0 ? std::string("/") : dir.substr(0, slash);
  }
  return out;
}

std::map<std::string, std::int64_t> parse_flat_keyed(std::string_view text) {
  std::map<std::string, std::int64_t> out;
  for_each_line(text, [&](std::string_view line) {
    const auto sp = line.find(' ');
    if (sp == std::string_view::npos) return;
    std::int64_t v = 0;
    const auto num = line.substr(sp + 1);
    if (std::from_chars(num.data(), num.data() + num.size(), v).ec == std::errc())
      out.emplace(std::string(line.substr(0, sp)), v);
  });
  return out;
}

std::optional<std::int64_t> parse_number(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.remove_suffix(1);
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<std::int64_t> parse_memory_limit(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.remove_suffix(1);
  if (text == "max") return std::nullopt;
  std::uint64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  // v1 says "no limit" as PAGE_COUNTER_MAX pages: 0x7FFFFFFFFFFFF000 with 4 KiB pages, a
  // little less with larger ones. Nothing real comes within 2^62 bytes of it.
  if (v >= (std::uint64_t{1} << 62)) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

}  // namespace kwd::platform::linux_proc
