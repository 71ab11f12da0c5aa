#pragma once

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kwd/util/unique_fd.hpp"

namespace kwd::util {

struct FileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr std::string_view kTemporaryPrefix = ".tmp-";

enum class Replace { kAllowed, kNever };
enum class Durability { kSynced, kAtomicOnly };

using WriteBytes = std::function<void(std::string_view)>;
// Makes a file's contents, handing them to `write` in order, in as many pieces as it likes.
using ContentWriter = std::function<void(const WriteBytes& write)>;

// A directory held open by a descriptor, after every directory on its path, from / down, was
// found to be one that only root and we can change: owned by root or by us, and not writable
// by others unless sticky (as /tmp is). What is private is created relative to that
// descriptor (mkdirat, openat, renameat), never found again by name; and because no one else
// can rename what lies on the path, the path itself may be handed out (a kernel's PYTHONPATH).
//
// Symbolic links in the path given are resolved once, first (macOS's /tmp -> /private/tmp),
// and only links that root or we own: one another user made is refused, not followed. The
// walk itself follows none, and path() is the resolved path.
class SafeDir {
 public:
  // An existing directory; nothing is created. Throws FileError saying which directory on the
  // way is unsafe and why.
  static SafeDir open(const std::filesystem::path& path);
  // mkdir -p: what is missing is created 0700; the last directory must be ours and is made
  // 0700 if it was looser. Throws FileError.
  static SafeDir open_private(const std::filesystem::path& path);

  // The directory `name` directly in this one, made 0700 if missing; one that is there must be
  // ours (a link is refused), and is made 0700 if it was looser. Throws FileError.
  [[nodiscard]] SafeDir private_child(std::string_view name) const;
  // A new directory "<prefix><random>" (0700) inside this one; never an existing one.
  [[nodiscard]] SafeDir make_unique_dir(std::string_view prefix) const;
  // Writes `contents` to `name` as Crashpad and Apport do: a temporary ".tmp-<pid>-XXXXXX"
  // in this directory, fsync, then renamed into place (Replace::kAllowed) or linked there
  // only if the name is free (Replace::kNever: FileError with EEXIST semantics otherwise),
  // then the directory fsync'd. A reader never sees a partial file. Durability::kAtomicOnly
  // leaves out both fsyncs: still never seen partial, but not waited onto the disk. For what
  // does not outlive the machine's next crash in any use (a kernel's shim and connection
  // file, a CI run's executed notebook): 1-2 ms per small file, 15 ms per 27 MB here.
  std::filesystem::path write_file(std::string_view name, std::string_view contents,
                                   unsigned mode = 0600, Replace replace = Replace::kAllowed,
                                   Durability durability = Durability::kSynced) const;
  // The same, for contents made as they are written (a file too large to hold twice); what
  // `contents` throws is thrown on, and nothing is left behind.
  std::filesystem::path write_file(std::string_view name, const ContentWriter& contents,
                                   unsigned mode = 0600, Replace replace = Replace::kAllowed,
                                   Durability durability = Durability::kSynced) const;
  // Removes temporaries whose writer is no longer alive. Returns how many.
  int sweep_temporaries() const;
  // Removes directories "<prefix><pid>-..." of ours whose pid is no longer alive (what a
  // watchdog killed with SIGKILL left behind). Returns how many.
  int sweep_dead_owners(std::string_view prefix) const;
  // Removes files "<prefix>..." last written more than `max_age_s` seconds ago. Returns how
  // many.
  int sweep_older_than(std::string_view prefix, long max_age_s) const;
  // Removes directories "<prefix>..." of ours, other than `keep`, whose own time of change is
  // more than `max_age_s` seconds ago (a user touches theirs to say it is in use). Returns how
  // many.
  int sweep_dirs_unused_for(std::string_view prefix, std::string_view keep, long max_age_s) const;
  // Removes `name` and everything under it, if it is a directory of ours; links are removed,
  // never followed. Returns false when it could not be removed whole.
  bool remove_tree(std::string_view name) const noexcept;

  [[nodiscard]] int fd() const { return fd_.get(); }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  SafeDir(UniqueFd fd, std::filesystem::path path) : fd_(std::move(fd)), path_(std::move(path)) {}
  static SafeDir walk(const std::filesystem::path& path, bool create);

  UniqueFd fd_;
  std::filesystem::path path_;
};

// `n` random letters and digits, for names that must not be guessed or collide.
std::string random_name(std::size_t n);

// $TMPDIR when it is an absolute path, else /tmp: a place other users share.
std::filesystem::path shared_temp_dir();

// For directories that are the user's to choose and may be shared on purpose (a kernelspec
// directory, an HTML export): written atomically like SafeDir::write_file, without the
// ownership walk. Throws FileError naming the step that failed.
std::filesystem::path write_file_atomically(const std::filesystem::path& dir, std::string_view name,
                                            std::string_view contents, unsigned mode = 0600);

}  // namespace kwd::util
