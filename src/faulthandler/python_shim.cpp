#include "kwd/faulthandler/python_shim.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>
#include <utility>

#include "kwd/data/embedded_files.hpp"

namespace kwd::faulthandler {
namespace fs = std::filesystem;
namespace {

// Under our own runtime directory, and directly in the shared temporary directory.
constexpr std::string_view kPrivatePrefix = "pyshim-";
constexpr std::string_view kSharedPrefix = "kernel-watchdog-shim-";

std::vector<std::string>::iterator find_var(std::vector<std::string>& env, std::string_view name) {
  for (auto it = env.begin(); it != env.end(); ++it)
    if (it->size() > name.size() && it->compare(0, name.size(), name) == 0 &&
        (*it)[name.size()] == '=')
      return it;
  return env.end();
}

// $XDG_RUNTIME_DIR/kernel-watchdog, if there is one and it passes the checks; else nothing,
// and the shim goes into the shared temporary directory.
std::optional<util::SafeDir> private_runtime_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg == nullptr || !fs::path(xdg).is_absolute()) return std::nullopt;
  try {
    return util::SafeDir::open_private(fs::path(xdg) / "kernel-watchdog");
  } catch (const util::FileError& e) {
    spdlog::debug("not using $XDG_RUNTIME_DIR for the faulthandler shim: {}", e.what());
    return std::nullopt;
  }
}

}  // namespace

PythonShim PythonShim::create() {
  std::optional<util::SafeDir> base = private_runtime_dir();
  std::string_view prefix = kPrivatePrefix;
  if (!base) {
    base = util::SafeDir::open(util::shared_temp_dir());
    prefix = kSharedPrefix;
  }
  base->sweep_dead_owners(prefix);
  util::SafeDir dir = base->make_unique_dir(std::string(prefix) + std::to_string(::getpid()) + "-");
  PythonShim shim(std::move(*base), std::move(dir));
  shim.add_file("sitecustomize.py", data::sitecustomize_py());
  return shim;
}

void PythonShim::add_file(std::string_view name, std::string_view contents) const {
  if (!own_) throw util::FileError("the shim directory is gone");
  // Lives as long as the kernel: nothing to keep through a crash of the machine.
  own_->write_file(name, contents, 0600, util::Replace::kAllowed, util::Durability::kAtomicOnly);
}

PythonShim::PythonShim(PythonShim&& other) noexcept
    : parent_(std::exchange(other.parent_, std::nullopt)),
      own_(std::exchange(other.own_, std::nullopt)),
      dir_(std::exchange(other.dir_, {})) {}

PythonShim& PythonShim::operator=(PythonShim&& other) noexcept {
  if (this != &other) {
    remove();
    parent_ = std::exchange(other.parent_, std::nullopt);
    own_ = std::exchange(other.own_, std::nullopt);
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
  if (dir_.empty() || !parent_) return;
  own_.reset();
  parent_->remove_tree(dir_.filename().string());
  dir_.clear();
}

}  // namespace kwd::faulthandler
