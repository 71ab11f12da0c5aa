#include "kwd/platform/root_view.hpp"

#include <cerrno>

#include "kwd/platform/regular_file.hpp"
#include "kwd/util/errno_text.hpp"

namespace kwd::platform {

RootView::FileRead RootView::read_opened(const std::string& path, const RegularFile& file,
                                         std::size_t max_bytes) {
  FileRead out;
  if (file.not_regular) {
    out.problem = path + ": not a regular file";
  } else if (!file.fd) {
    // ENOTDIR: a file on the way is where a directory would be, so nothing is at `path`.
    out.missing = file.error == ENOENT || file.error == ENOTDIR;
    if (!out.missing) out.problem = util::cannot("open", path, file.error);
  } else {
    out.owner = file.st.st_uid;
    out.text = read_up_to(file.fd.get(), max_bytes);
    if (!out.text) out.problem = util::cannot("read", path, errno);
  }
  return out;
}

}  // namespace kwd::platform
