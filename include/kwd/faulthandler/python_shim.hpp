#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kwd::faulthandler {

// Gets a Python kernel to print its stack when it dies of a fatal signal, to a place that
// outlives it (see data/python/sitecustomize.py for why PYTHONFAULTHANDLER alone is not
// enough under ipykernel).
//
// A private directory (0700) holding the sitecustomize.py shim; the kernel finds it first on
// its PYTHONPATH. The shim removes itself from sys.path and os.environ once it has run, so
// the notebook sees the environment it would have seen without the watchdog.
class PythonShim {
 public:
  // Creates the directory under runtime_dir(). Throws util::FileError.
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

 private:
  explicit PythonShim(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::filesystem::path dir_;
};

// $XDG_RUNTIME_DIR/kernel-watchdog, else ${TMPDIR:-/tmp}/kernel-watchdog-<uid>/run.
std::filesystem::path runtime_dir();

// Removes shim directories left by watchdogs that are no longer running (killed with
// SIGKILL before they could clean up). Returns how many.
int sweep_stale_shims(const std::filesystem::path& base);

}  // namespace kwd::faulthandler
