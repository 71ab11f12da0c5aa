#include "kwd/platform/root_view.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "kwd/platform/file_time.hpp"
#include "kwd/platform/read_worker.hpp"
#include "kwd/platform/regular_file.hpp"

namespace kwd::platform {
namespace {

// `path` opened with `flags` below `root`, resolved as if `root` were "/". Kernels before 5.6
// have no openat2: the host's own root then resolves as any open does; another process's
// root cannot be walked safely and is refused.
util::UniqueFd open_in_root(const util::UniqueFd* root, const std::string& path, int flags) {
  if (root == nullptr) return util::UniqueFd(::open(path.c_str(), flags | O_CLOEXEC));
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  return util::UniqueFd(
      static_cast<int>(::syscall(SYS_openat2, root->get(), path.c_str(), &how, sizeof how)));
}

}  // namespace

const RootView& RootView::host() {
  static const RootView view = [] {
    auto fd = std::make_shared<util::UniqueFd>(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    // Without openat2 the host's paths are used as they are.
    open_how probe{};
    probe.flags = O_PATH | O_CLOEXEC;
    const util::UniqueFd works(
        static_cast<int>(::syscall(SYS_openat2, fd->get(), ".", &probe, sizeof probe)));
    return RootView(works ? std::shared_ptr<const util::UniqueFd>(std::move(fd)) : nullptr);
  }();
  return view;
}

std::optional<RootView> RootView::of_process(const std::string& proc_root, pid_t pid) {
  const std::string link = proc_root + "/" + std::to_string(pid) + "/root";
  auto fd =
      std::make_shared<util::UniqueFd>(::open(link.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!*fd) return std::nullopt;
  if (host().root_) return RootView(std::move(fd));
  // No openat2 (Linux before 5.6, or a seccomp profile that refuses it): another root cannot
  // be walked safely; a process whose root and mounts are ours is read as ours. (The same
  // "/" in a mount namespace of its own, systemd's PrivateTmp for one, names other files.)
  const auto same = [](const struct stat& a, const struct stat& b) {
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  };
  struct stat their_root {
  }, our_root{}, their_mounts{}, our_mounts{};
  const std::string mounts = proc_root + "/" + std::to_string(pid) + "/ns/mnt";
  if (::fstat(fd->get(), &their_root) == 0 && ::stat("/", &our_root) == 0 &&
      same(their_root, our_root) && ::stat(mounts.c_str(), &their_mounts) == 0 &&
      ::stat("/proc/self/ns/mnt", &our_mounts) == 0 && same(their_mounts, our_mounts))
    return host();
  return std::nullopt;
}

std::optional<RootView::Entry> RootView::stat(const std::string& path) const {
  const ReadingFile reading(path);
  const util::UniqueFd handle = open_in_root(root_.get(), path, O_PATH);
  struct stat st {};
  if (!handle || ::fstat(handle.get(), &st) != 0) return std::nullopt;
  return Entry{st.st_dev, st.st_ino, modified_ns(st), S_ISDIR(st.st_mode)};
}

RootView::FileRead RootView::read_file(const std::string& path, std::size_t max_bytes) const {
  // Ours: as every file named from outside is read (which copes without /proc too). Another
  // root's: through the descriptor whose type was checked, never by name again, so what a
  // container renames into place meanwhile (a FIFO, a device) is never opened.
  const ReadingFile reading(path);
  RegularFile file;
  if (root_ == host().root_) {
    file = open_regular_file(AT_FDCWD, path.c_str());
  } else {
    const util::UniqueFd handle = open_in_root(root_.get(), path, O_PATH);
    if (!handle) {
      file.error = errno;
    } else {
      file = reopen_regular_file(handle);
      // Not "missing": the file is there; this process has no /proc to reopen it through.
      if (!file.fd && file.error == ENOENT) file.error = ENOTSUP;
    }
  }
  return read_opened(path, file, max_bytes);
}

std::vector<std::string> RootView::list(const std::string& path) const {
  const ReadingFile reading(path);
  return names_in_directory(open_in_root(root_.get(), path, O_RDONLY | O_DIRECTORY | O_NONBLOCK));
}

}  // namespace kwd::platform
