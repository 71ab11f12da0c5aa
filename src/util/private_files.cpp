#include "kwd/util/private_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "kwd/util/process_exists.hpp"
#include "kwd/util/random_bytes.hpp"
#include "kwd/util/unique_dir.hpp"
#include "kwd/util/wipe.hpp"

namespace kwd::util {
namespace fs = std::filesystem;

namespace {

constexpr int kMaxTreeDepth = 16;

[[noreturn]] void fail(const std::string& what, const fs::path& path, int err) {
  throw FileError(what + " " + path.string() + ": " + std::strerror(err));
}

}  // namespace

std::string random_name(std::size_t n) {
  static constexpr std::string_view kAlphabet =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  // Drawn from the system's generator in batches (a connection key is made here too, so it
  // must be a cryptographic one), not through a std::random_device per name: that opened the
  // entropy source and made a system call per four bytes, for every message id a client
  // sends. Bytes at or above 248 (4 x 62) are dropped, so each character is equally likely.
  constexpr unsigned kUnbiasedBelow = 4 * kAlphabet.size();
  std::string out;
  out.reserve(n);
  unsigned char batch[64];
  while (out.size() < n) {
    random_bytes(batch, sizeof batch);
    for (const unsigned char byte : batch)
      if (byte < kUnbiasedBelow && out.size() < n) out += kAlphabet[byte % kAlphabet.size()];
  }
  wipe(batch, sizeof batch);
  return out;
}

namespace {

// Who may change what a name under this directory points to: only root and we, or the
// directory is unsafe to keep anything private under.
void check_safe(const struct stat& st, const fs::path& at) {
  if (!S_ISDIR(st.st_mode)) throw FileError(at.string() + " is not a directory");
  const std::string refusing = ": refusing to keep private files under it";
  if (st.st_uid != 0 && st.st_uid != ::geteuid())
    throw FileError(at.string() + " belongs to another user (uid " + std::to_string(st.st_uid) +
                    ")" + refusing);
  const bool sticky = (st.st_mode & S_ISVTX) != 0;
  if ((st.st_mode & S_IWOTH) != 0 && !sticky)
    throw FileError(at.string() + " is writable by others (and not sticky)" + refusing);
  // A group of our own (user private groups) is us; any other group is other users.
  if ((st.st_mode & S_IWGRP) != 0 && !sticky && st.st_gid != ::getegid())
    throw FileError(at.string() + " is writable by group " + std::to_string(st.st_gid) +
                    " (and not sticky)" + refusing);
}

// `path` with its symbolic links resolved, following only links that root or we own: a link
// another user made (in /tmp, in place of a directory we would create) could otherwise lead
// the walk into any directory of ours, which it would then make 0700 and fill. What does not
// exist yet is kept as written. The kernel's fs.protected_symlinks refuses most such links;
// this does not count on it being on.
fs::path resolve_trusted_links(const fs::path& path) {
  std::vector<std::string> pending;  // components still to look at, the next one last
  const auto push = [&pending](const fs::path& p) {
    std::vector<std::string> parts;
    for (const auto& part : p.relative_path())
      parts.push_back(part.string());
    pending.insert(pending.end(), parts.rbegin(), parts.rend());
  };
  push(path);
  fs::path at = "/";
  int links_followed = 0;
  bool missing = false;
  while (!pending.empty()) {
    const std::string name = std::move(pending.back());
    pending.pop_back();
    if (name.empty() || name == ".") continue;
    if (name == ".." && !missing) {
      at = at.parent_path();
      continue;
    }
    const fs::path next = at / name;
    struct stat st {};
    if (!missing && ::lstat(next.c_str(), &st) != 0) {
      if (errno != ENOENT && errno != ENOTDIR) fail("cannot inspect", next, errno);
      missing = true;  // to be created (or refused by the walk): nothing below is a link yet
    }
    if (missing || !S_ISLNK(st.st_mode)) {
      at = next;
      continue;
    }
    if (st.st_uid != 0 && st.st_uid != ::geteuid())
      throw FileError(next.string() + " is a symbolic link of another user's (uid " +
                      std::to_string(st.st_uid) + "): refusing to follow it");
    if (++links_followed > 40) throw FileError(path.string() + ": too many symbolic links");
    std::string target(PATH_MAX, '\0');
    const ssize_t n = ::readlink(next.c_str(), target.data(), target.size());
    if (n < 0) fail("cannot read the link", next, errno);
    if (static_cast<std::size_t>(n) >= target.size())
      throw FileError(next.string() + ": symbolic link target too long");
    target.resize(static_cast<std::size_t>(n));
    if (fs::path(target).is_absolute()) at = "/";
    push(fs::path(target).relative_path());
  }
  return at;
}

// A listing of the directory behind `fd` (the descriptor itself stays ours and open).
UniqueDir list_dir(int fd) {
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return nullptr;
  DIR* d = ::fdopendir(copy);
  if (d == nullptr) {
    ::close(copy);
    return nullptr;
  }
  ::rewinddir(d);
  return UniqueDir(d);
}

template <typename F>
void for_each_entry(int fd, F&& f) {
  auto d = list_dir(fd);
  if (!d) return;
  while (const dirent* e = ::readdir(d.get())) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    f(std::string(name));
  }
}

bool remove_tree_at(int parent, const std::string& name, int depth) noexcept {
  struct stat st {};
  if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT;
  if (!S_ISDIR(st.st_mode)) return ::unlinkat(parent, name.c_str(), 0) == 0;
  if (st.st_uid != ::geteuid() || depth > kMaxTreeDepth) return false;
  UniqueFd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return false;
  bool whole = true;
  try {
    for_each_entry(fd.get(), [&](const std::string& entry) {
      whole = remove_tree_at(fd.get(), entry, depth + 1) && whole;
    });
  } catch (...) {  // allocation failure while listing: leave it to the next sweep
    return false;
  }
  return ::unlinkat(parent, name.c_str(), AT_REMOVEDIR) == 0 && whole;
}

// Removes the entries "<prefix>..." of `dir` other than `keep` that were last changed more than
// `max_age_s` seconds ago and that `ours` accepts by their lstat. Returns how many.
template <typename Ours>
int sweep_stale(int dir, std::string_view prefix, std::string_view keep, long max_age_s,
                Ours ours) {
  int removed = 0;
  const std::time_t now = std::time(nullptr);
  for_each_entry(dir, [&](const std::string& name) {
    if (!name.starts_with(prefix) || name == keep) return;
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
    if (!ours(st) || now - st.st_mtime <= max_age_s) return;
    if (remove_tree_at(dir, name, 0)) ++removed;
  });
  return removed;
}

ContentWriter whole(std::string_view contents) {
  return [contents](const WriteBytes& write) { write(contents); };
}

// Writes into `dir_fd`; `dir` only names it in messages and in the returned path.
fs::path write_at(int dir_fd, const fs::path& dir, std::string_view name,
                  const ContentWriter& contents, unsigned mode, Replace replace,
                  Durability durability = Durability::kSynced) {
  const std::string tmp_name =
      std::string(kTemporaryPrefix) + std::to_string(::getpid()) + "-" + random_name(6);
  UniqueFd fd(::openat(dir_fd, tmp_name.c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) fail("cannot create a temporary file in", dir, errno);
  auto abandon = [&](const std::string& what) {
    const int err = errno;
    ::unlinkat(dir_fd, tmp_name.c_str(), 0);
    fail(what, dir / tmp_name, err);
  };
  if (::fchmod(fd.get(), static_cast<mode_t>(mode)) != 0) abandon("cannot set the mode of");
  const WriteBytes write_all = [&](std::string_view bytes) {
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) abandon("cannot write");
      done += static_cast<std::size_t>(n);
    }
  };
  try {
    contents(write_all);
  } catch (...) {  // a failed write (abandon() removed it already) or the writer's own error
    ::unlinkat(dir_fd, tmp_name.c_str(), 0);
    throw;
  }
  if (durability == Durability::kSynced && ::fsync(fd.get()) != 0) abandon("cannot fsync");
  if (::close(fd.release()) != 0) abandon("cannot close");
  const std::string final_name(name);
  if (replace == Replace::kNever) {
    // link(2) fails with EEXIST rather than replace: the one portable no-clobber rename.
    if (::linkat(dir_fd, tmp_name.c_str(), dir_fd, final_name.c_str(), 0) != 0)
      abandon("cannot link into place as " + final_name + ":");
    ::unlinkat(dir_fd, tmp_name.c_str(), 0);
  } else if (::renameat(dir_fd, tmp_name.c_str(), dir_fd, final_name.c_str()) != 0) {
    abandon("cannot rename into place");
  }
  if (durability == Durability::kSynced)
    ::fsync(dir_fd);  // best effort: the file itself is already durable
  return dir / final_name;
}

}  // namespace

namespace {

// The directory `name` under `parent_fd`, made 0700 first when it is missing and `create`;
// never reached through a link.
UniqueFd open_child_dir(int parent_fd, const std::string& name, const fs::path& at, bool create) {
  constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  UniqueFd fd(::openat(parent_fd, name.c_str(), kFlags));
  if (!fd && errno == ENOENT && create) {
    if (::mkdirat(parent_fd, name.c_str(), 0700) != 0 && errno != EEXIST)
      fail("cannot create directory", at, errno);
    fd.reset(::openat(parent_fd, name.c_str(), kFlags));
  }
  if (!fd) {
    if (errno == ENOTDIR || errno == ELOOP)
      throw FileError(at.string() + " exists and is not a directory (or is a symbolic link)");
    fail("cannot open", at, errno);
  }
  return fd;
}

// A directory to keep private files in must be ours, and is made 0700 if it was looser.
void make_private(int fd, const struct stat& st, const fs::path& at) {
  if (st.st_uid != ::geteuid())
    throw FileError(at.string() + " belongs to another user (uid " + std::to_string(st.st_uid) +
                    ")");
  if ((st.st_mode & 077) != 0 && ::fchmod(fd, 0700) != 0) fail("cannot make private", at, errno);
}

}  // namespace

SafeDir SafeDir::open(const fs::path& path) {
  return walk(path, false);
}

SafeDir SafeDir::open_private(const fs::path& path) {
  return walk(path, true);
}

SafeDir SafeDir::walk(const fs::path& path, bool create) {
  if (path.empty()) throw FileError("empty directory path");
  if (!path.is_absolute()) throw FileError(path.string() + " is not an absolute path");
  // Links resolved once, up front: from here on a link anywhere on the way is refused.
  const fs::path resolved = resolve_trusted_links(path);
  UniqueFd fd(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) fail("cannot open", "/", errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail("cannot inspect", "/", errno);
  check_safe(st, "/");
  fs::path at = "/";
  for (const auto& part : resolved.relative_path()) {
    const std::string name = part.string();
    if (name.empty() || name == ".") continue;
    if (name == "..") throw FileError(path.string() + ": '..' in a private path");
    at /= part;
    UniqueFd next = open_child_dir(fd.get(), name, at, create);
    if (::fstat(next.get(), &st) != 0) fail("cannot inspect", at, errno);
    check_safe(st, at);
    fd = std::move(next);
  }
  if (create) {
    make_private(fd.get(), st, at);
    if (::faccessat(fd.get(), ".", W_OK | X_OK, 0) != 0) fail("cannot write into", at, errno);
  }
  return SafeDir(std::move(fd), at);
}

SafeDir SafeDir::private_child(std::string_view name) const {
  const std::string child(name);
  if (child.empty() || child == "." || child == ".." || child.find('/') != std::string::npos)
    throw FileError("not a plain directory name: " + child);
  const fs::path at = path_ / child;
  UniqueFd fd = open_child_dir(fd_.get(), child, at, true);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail("cannot inspect", at, errno);
  make_private(fd.get(), st, at);
  return SafeDir(std::move(fd), at);
}

SafeDir SafeDir::make_unique_dir(std::string_view prefix) const {
  for (int attempt = 0; attempt < 64; ++attempt) {
    const std::string name = std::string(prefix) + random_name(8);
    if (::mkdirat(fd_.get(), name.c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;
      fail("cannot create a directory in", path_, errno);
    }
    UniqueFd fd(::openat(fd_.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) fail("cannot open", path_ / name, errno);
    struct stat st {};
    // Ours unless the name was taken over between mkdirat and openat, which the walk that
    // opened this directory rules out; checked anyway, it costs one fstat.
    if (::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)
      throw FileError(path_.string() + "/" + name + " was replaced while being created");
    return SafeDir(std::move(fd), path_ / name);
  }
  throw FileError("cannot find a free name in " + path_.string());
}

fs::path SafeDir::write_file(std::string_view name, std::string_view contents, unsigned mode,
                             Replace replace, Durability durability) const {
  return write_at(fd_.get(), path_, name, whole(contents), mode, replace, durability);
}

fs::path SafeDir::write_file(std::string_view name, const ContentWriter& contents, unsigned mode,
                             Replace replace, Durability durability) const {
  return write_at(fd_.get(), path_, name, contents, mode, replace, durability);
}

int SafeDir::sweep_temporaries() const {
  int removed = 0;
  for_each_entry(fd_.get(), [&](const std::string& name) {
    if (!name.starts_with(kTemporaryPrefix)) return;
    const pid_t writer = pid_after_prefix(name, kTemporaryPrefix).value_or(0);
    if (writer > 0 && process_exists(writer)) return;
    if (::unlinkat(fd_.get(), name.c_str(), 0) == 0) ++removed;
  });
  return removed;
}

int SafeDir::sweep_dead_owners(std::string_view prefix) const {
  int removed = 0;
  for_each_entry(fd_.get(), [&](const std::string& name) {
    const pid_t owner = pid_after_prefix(name, prefix).value_or(0);
    if (owner <= 0 || process_exists(owner)) return;
    struct stat st {};
    if (::fstatat(fd_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
    if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) return;
    if (remove_tree_at(fd_.get(), name, 0)) ++removed;
  });
  return removed;
}

int SafeDir::sweep_older_than(std::string_view prefix, long max_age_s) const {
  return sweep_stale(fd_.get(), prefix, {}, max_age_s,
                     [](const struct stat& st) { return S_ISREG(st.st_mode); });
}

int SafeDir::sweep_dirs_unused_for(std::string_view prefix, std::string_view keep,
                                   long max_age_s) const {
  return sweep_stale(fd_.get(), prefix, keep, max_age_s, [](const struct stat& st) {
    return S_ISDIR(st.st_mode) && st.st_uid == ::geteuid();
  });
}

bool SafeDir::remove_tree(std::string_view name) const noexcept {
  try {
    return remove_tree_at(fd_.get(), std::string(name), 0);
  } catch (...) {
    return false;
  }
}

fs::path shared_temp_dir() {
  const char* tmp = std::getenv("TMPDIR");
  if (tmp != nullptr && fs::path(tmp).is_absolute()) return tmp;
  return "/tmp";
}

fs::path write_file_atomically(const fs::path& dir, std::string_view name,
                               std::string_view contents, unsigned mode) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) fail("cannot open directory", dir, errno);
  return write_at(fd.get(), dir, name, whole(contents), mode, Replace::kAllowed);
}

}  // namespace kwd::util
