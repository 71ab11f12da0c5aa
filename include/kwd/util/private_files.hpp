#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

namespace kwd::util {

struct FileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// mkdir -p where every directory this call creates is 0700; the leaf must end up a directory
// owned by us (a leaf someone else planted, e.g. in /tmp, is refused). Throws FileError.
void ensure_private_dir(const std::filesystem::path& dir);

// Writes `contents` to dir/name as Crashpad and Apport do: a temporary name in the same
// directory (".tmp-<pid>-XXXXXX", mode 0600), fsync, rename into place, fsync the directory.
// A reader never sees a partial file; a crash mid-write leaves only a temporary that
// sweep_temporaries() removes. Throws FileError naming the step that failed.
std::filesystem::path write_file_atomically(const std::filesystem::path& dir, std::string_view name,
                                            std::string_view contents, unsigned mode = 0600);

// Removes temporaries left by writers that are no longer alive. Returns how many.
int sweep_temporaries(const std::filesystem::path& dir);

inline constexpr std::string_view kTemporaryPrefix = ".tmp-";

}  // namespace kwd::util
