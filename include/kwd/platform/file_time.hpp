#pragma once

#include <sys/stat.h>

#include <cstdint>

namespace kwd::platform {

// When the file was last written, in ms since the epoch: struct stat names that field st_mtim
// on Linux and st_mtimespec on macOS.
std::int64_t modified_ms(const struct stat& st);
// The same in ns: a directory listed and changed again within one ms still differs.
std::int64_t modified_ns(const struct stat& st);

}  // namespace kwd::platform
