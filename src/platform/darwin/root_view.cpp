#include "kwd/platform/root_view.hpp"

#include <fcntl.h>
#include <unistd.h>

#include "kwd/platform/file_time.hpp"
#include "kwd/platform/read_worker.hpp"
#include "kwd/platform/regular_file.hpp"

// macOS has no openat2 and no /proc/PID/root: only the host's own file system is viewed, with
// paths used as they are.

namespace kwd::platform {

const RootView& RootView::host() {
  static const RootView view(nullptr);
  return view;
}

std::optional<RootView> RootView::of_process(const std::string& /*proc_root*/, pid_t /*pid*/) {
  return std::nullopt;
}

std::optional<RootView::Entry> RootView::stat(const std::string& path) const {
  const ReadingFile reading(path);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return Entry{st.st_dev, st.st_ino, modified_ns(st), S_ISDIR(st.st_mode)};
}

RootView::FileRead RootView::read_file(const std::string& path, std::size_t max_bytes) const {
  const ReadingFile reading(path);
  return read_opened(path, open_regular_file(AT_FDCWD, path.c_str()), max_bytes);
}

std::vector<std::string> RootView::list(const std::string& path) const {
  const ReadingFile reading(path);
  return names_in_directory(
      util::UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC)));
}

}  // namespace kwd::platform
