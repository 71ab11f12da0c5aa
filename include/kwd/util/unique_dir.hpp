#pragma once

#include <dirent.h>

#include <memory>

namespace kwd::util {

struct DirCloser {
  void operator()(DIR* dir) const noexcept { ::closedir(dir); }
};

// Owns one directory stream (opendir, fdopendir); closes it, and its descriptor, once.
using UniqueDir = std::unique_ptr<DIR, DirCloser>;

}  // namespace kwd::util
