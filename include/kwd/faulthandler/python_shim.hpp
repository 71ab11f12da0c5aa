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
// user can swap: in $XDG_RUNTIME_DIR/kernel-watchdog when that is usable, else created
// with a random name directly in $TMPDIR (never under a fixed name there, which another
// user could create first). See util::SafeDir for the checks.
class PythonShim {
 public:
  // Throws util::FileError saying why no shim could be made.
  static PythonShim create();
  PythonShim(PythonShim&& other) noexcept;
  PythonShim& operator=(PythonShim&& other) noexcept;
  PythonShim(const PythonShim&) = delete;
  PythonShim& operator=(const PythonShim&) = delete;
  ~PythonShim();

  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }
  // Edits a "NAME=value" environment for the kernel: the shim directory first on PYTHONPATH,
  // and PYTHONFAULTHANDLER=1 for Python processes the shim does not reach (unless set).
  void apply(std::vector<std::string>& environment) const;
  // Removes the directory (the interpreter has long imported the shim when this runs).
  void remove() noexcept;
  // Puts a file beside the shim for it to read when the kernel starts (notice.json: the
  // previous kernel's death). Throws util::FileError.
  void add_file(std::string_view name, std::string_view contents) const;

 private:
  PythonShim(util::SafeDir parent, util::SafeDir own)
      : parent_(std::move(parent)), own_(std::move(own)), dir_(own_->path()) {}
  std::optional<util::SafeDir> parent_;
  std::optional<util::SafeDir> own_;
  std::filesystem::path dir_;
};

}  // namespace kwd::faulthandler
