#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kwd/util/private_files.hpp"

namespace kwd::faulthandler {

// Gets a Python kernel to print its stack when it dies of a fatal signal, to a place that
// outlives it (see data/python/sitecustomize.py for why PYTHONFAULTHANDLER alone is not
// enough under ipykernel).
//
// A private directory (0700) holding the sitecustomize.py shim; the kernel finds it first on
// its PYTHONPATH. The shim removes itself from sys.path and os.environ once it has run, so
// the notebook sees the environment it would have seen without the watchdog.
//
// Whatever is on that PYTHONPATH runs inside the kernel, so the directory is one no other
// user can swap. Where the watchdog has a private directory of its own ($XDG_RUNTIME_DIR/
// kernel-watchdog, else $TMPDIR/kernel-watchdog-<uid>, both checked by util::SafeDir), the
// shim lives there in "pycode-<hash of its text>", kept from one kernel to the next, so the
// interpreter's bytecode cache beside it is kept too: compiling the shim cost each start
// 2.7 ms more than importing it from that cache. Where neither is usable (another user squats the
// fixed name), a directory with a random name directly in $TMPDIR holds it for one kernel.
class PythonShim {
 public:
  // Throws util::FileError saying why no shim could be made.
  static PythonShim create();
  PythonShim(PythonShim&& other) noexcept;
  PythonShim& operator=(PythonShim&& other) noexcept;
  PythonShim(const PythonShim&) = delete;
  PythonShim& operator=(const PythonShim&) = delete;
  ~PythonShim();

  // The directory the kernel imports the shim from.
  [[nodiscard]] const std::filesystem::path& dir() const { return code_dir_; }
  // Edits a "NAME=value" environment for the kernel: the shim directory first on PYTHONPATH,
  // PYTHONFAULTHANDLER=1 for Python processes the shim does not reach (unless set), and where
  // the previous kernel's death notice is, if one was given.
  void apply(std::vector<std::string>& environment) const;
  // Removes what was this kernel's alone: its notice, and the shim when it was not kept.
  void remove() noexcept;
  // Gives the shim the previous kernel's death notice (JSON) to show above the first cell's
  // output; in a directory of this kernel's own. Throws util::FileError.
  void add_notice(std::string_view notice_json);

 private:
  PythonShim(util::SafeDir parent, std::optional<util::SafeDir> own, std::filesystem::path code)
      : parent_(std::move(parent)), own_(std::move(own)), code_dir_(std::move(code)) {}
  util::SafeDir& own_dir();

  std::optional<util::SafeDir> parent_;  // where this kernel's own directory is made
  std::optional<util::SafeDir> own_;     // this kernel's own, made when first needed
  std::filesystem::path code_dir_;
  std::filesystem::path notice_;
};

}  // namespace kwd::faulthandler
