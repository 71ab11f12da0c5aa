#include "kwd/faulthandler/python_shim.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "kwd/data/embedded_files.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/util/process_exists.hpp"

namespace kwd::faulthandler {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kPrefix = "pyshim-";

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::vector<std::string>::iterator find_var(std::vector<std::string>& env, std::string_view name) {
  for (auto it = env.begin(); it != env.end(); ++it)
    if (it->size() > name.size() && it->compare(0, name.size(), name) == 0 &&
        (*it)[name.size()] == '=')
      return it;
  return env.end();
}

}  // namespace

fs::path runtime_dir() {
  const std::string xdg = env_or_empty("XDG_RUNTIME_DIR");
  if (!xdg.empty() && fs::path(xdg).is_absolute()) return fs::path(xdg) / "kernel-watchdog";
  std::string tmp = env_or_empty("TMPDIR");
  if (tmp.empty() || !fs::path(tmp).is_absolute()) tmp = "/tmp";
  return fs::path(tmp) / ("kernel-watchdog-" + std::to_string(::geteuid())) / "run";
}

int sweep_stale_shims(const fs::path& base) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(base, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kPrefix)) continue;
    const pid_t owner = util::pid_after_prefix(name, kPrefix).value_or(0);
    if (owner > 0 && util::process_exists(owner)) continue;
    if (fs::remove_all(entry.path(), ec) > 0) ++removed;
  }
  return removed;
}

PythonShim PythonShim::create() {
  const fs::path base = runtime_dir();
  util::ensure_private_dir(base);
  sweep_stale_shims(base);
  std::string tmpl =
      (base / (std::string(kPrefix) + std::to_string(::getpid()) + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw util::FileError("cannot create a directory in " + base.string() + ": " +
                          std::strerror(errno));
  PythonShim shim{fs::path(tmpl)};
  util::write_file_atomically(shim.dir_, "sitecustomize.py", data::sitecustomize_py(), 0600);
  return shim;
}

PythonShim::PythonShim(PythonShim&& other) noexcept : dir_(std::exchange(other.dir_, {})) {}

PythonShim& PythonShim::operator=(PythonShim&& other) noexcept {
  if (this != &other) {
    remove();
    dir_ = std::exchange(other.dir_, {});
  }
  return *this;
}

PythonShim::~PythonShim() {
  remove();
}

void PythonShim::apply(std::vector<std::string>& env) const {
  if (dir_.empty()) return;
  if (auto it = find_var(env, "PYTHONPATH"); it != env.end()) {
    const std::string old = it->substr(sizeof("PYTHONPATH"));
    *it = "PYTHONPATH=" + dir_.string() + (old.empty() ? "" : ":" + old);
  } else {
    env.push_back("PYTHONPATH=" + dir_.string());
    // Tells the shim to drop PYTHONPATH altogether rather than leave an empty one.
    env.emplace_back("KERNEL_WATCHDOG_PYTHONPATH_UNSET=1");
  }
  if (find_var(env, "PYTHONFAULTHANDLER") == env.end()) {
    env.emplace_back("PYTHONFAULTHANDLER=1");
    // Ours, not the user's: the shim removes it from the notebook's os.environ again.
    env.emplace_back("KERNEL_WATCHDOG_FAULTHANDLER_ADDED=1");
  }
}

void PythonShim::remove() noexcept {
  if (dir_.empty()) return;
  std::error_code ec;
  fs::remove_all(dir_, ec);
  dir_.clear();
}

}  // namespace kwd::faulthandler
