#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kwd/util/unique_fd.hpp"

namespace kwd::platform {

struct RegularFile;

// A process's file system, with paths named as that process names them: a kernel in a
// container maps "/opt/conda/lib/python3.11/site-packages/torch/lib/libc10.so", which is its
// container's file, not the node's. On Linux every path is resolved inside the process's root
// directory (/proc/PID/root, held open from the moment the view is made; openat2
// RESOLVE_IN_ROOT, no /proc magic links), symbolic links included, so a link planted in the
// container pointing at "/etc/shadow" names the container's file, never the host's. The root
// stays readable after the process has died: the view holds it, as a lazily unmounted file
// system stays readable through an open directory. Only regular files are read (a FIFO
// cannot block, a device's driver never sees an open: a file is opened for reading only
// through the descriptor whose type was checked), each up to a limit. Copies share the one
// descriptor.
class RootView {
 public:
  // This process's own root ("/"): paths resolve as they do for any call of ours.
  static const RootView& host();
  // The root of process `pid` as `proc_root` (/proc) shows it; nullopt when it cannot be
  // opened (gone, or not ours to look into: ptrace access rules), or when it is not ours and
  // this system has no openat2 to walk it safely. On macOS only the host's.
  static std::optional<RootView> of_process(const std::string& proc_root, pid_t pid);

  struct Entry {
    dev_t dev = 0;
    ino_t ino = 0;
    std::int64_t modified_ns = -1;
    bool directory = false;
  };
  // What `path` is (symbolic links followed, inside the root); nullopt when it is not there.
  [[nodiscard]] std::optional<Entry> stat(const std::string& path) const;
  // A file read, or why not.
  struct FileRead {
    std::optional<std::string> text;       // nullopt: not read (see missing, problem)
    bool missing = false;                  // it does not exist (yet)
    std::string problem;                   // why not, in words, when it exists but was not read
    uid_t owner = static_cast<uid_t>(-1);  // the file's, when it was read
  };
  // The first `max_bytes` of regular file `path`.
  [[nodiscard]] FileRead read_file(const std::string& path, std::size_t max_bytes) const;
  // The same, nullopt whatever the reason.
  [[nodiscard]] std::optional<std::string> read(const std::string& path,
                                                std::size_t max_bytes) const {
    return read_file(path, max_bytes).text;
  }
  // The names in directory `path` ("." and ".." left out); empty when it cannot be listed.
  [[nodiscard]] std::vector<std::string> list(const std::string& path) const;

 private:
  explicit RootView(std::shared_ptr<const util::UniqueFd> root) : root_(std::move(root)) {}
  // What was opened as `path`, read or said why not (both platforms).
  static FileRead read_opened(const std::string& path, const RegularFile& file,
                              std::size_t max_bytes);
  // An O_PATH descriptor of the root; null for the host's on a platform without openat2
  // (paths are then used as they are).
  std::shared_ptr<const util::UniqueFd> root_;
};

}  // namespace kwd::platform
