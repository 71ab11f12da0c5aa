#include "kwd/faulthandler/python_shim.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "kwd/data/embedded_files.hpp"
#include "kwd/platform/regular_file.hpp"

namespace kwd::faulthandler {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kShimFile = "sitecustomize.py";
// A kernel's own directory (its notice; the shim too when it is not kept), under the
// watchdog's private directory or directly in the shared temporary directory.
constexpr std::string_view kPrivatePrefix = "pyshim-";
constexpr std::string_view kSharedPrefix = "kernel-watchdog-shim-";
// The kept shim: not "pyshim-<pid>-", which sweep_dead_owners would take for a dead kernel's.
constexpr std::string_view kKeptPrefix = "pycode-";
constexpr std::string_view kNoticeVariable = "KERNEL_WATCHDOG_NOTICE";
// A kept shim no watchdog has started a kernel with for this long is another version's, left
// by an upgrade: swept. (One still in use is written again by its next start.)
constexpr long kKeptShimUnusedS = 7L * 24 * 3600;

// Whether a "NAME=value" entry sets `name`.
bool sets(const std::string& entry, std::string_view name) {
  return entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 &&
         entry[name.size()] == '=';
}

std::vector<std::string>::iterator find_var(std::vector<std::string>& env, std::string_view name) {
  return std::find_if(env.begin(), env.end(),
                      [name](const std::string& entry) { return sets(entry, name); });
}

// FNV-1a: names the shim's text, so a watchdog of another version never imports this one's.
std::string text_hash(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4)
    out[static_cast<std::size_t>(i)] = kHex[h & 0xf];
  return out;
}

// The watchdog's private directory: $XDG_RUNTIME_DIR/kernel-watchdog when there is one and it
// passes the checks, else $TMPDIR/kernel-watchdog-<uid> (where reports and notices fall back
// to), else nothing.
std::optional<util::SafeDir> private_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && fs::path(xdg).is_absolute()) {
    try {
      return util::SafeDir::open_private(fs::path(xdg) / "kernel-watchdog");
    } catch (const util::FileError& e) {
      spdlog::debug("not using $XDG_RUNTIME_DIR for the faulthandler shim: {}", e.what());
    }
  }
  try {
    // Opened relative to the shared directory, never by a path through it: a link another
    // user put there is refused.
    return util::SafeDir::open(util::shared_temp_dir())
        .private_child("kernel-watchdog-" + std::to_string(::geteuid()));
  } catch (const util::FileError& e) {
    spdlog::debug("faulthandler shim: no private directory to keep it in: {}", e.what());
    return std::nullopt;
  }
}

// The kept shim's directory, with the shim written unless it is there whole already.
util::SafeDir kept_shim(const util::SafeDir& parent, std::string_view text) {
  const std::string name = std::string(kKeptPrefix) + text_hash(text);
  auto dir = parent.private_child(name);
  // Its time of change says when a watchdog last used it: the sweep below goes by it.
  ::futimens(dir.fd(), nullptr);
  parent.sweep_dirs_unused_for(kKeptPrefix, name, kKeptShimUnusedS);
  auto file = platform::open_regular_file(dir.fd(), std::string(kShimFile).c_str(), O_NOFOLLOW);
  if (file.fd && file.st.st_uid == ::geteuid() &&
      static_cast<std::size_t>(file.st.st_size) == text.size())
    if (const auto current = platform::read_up_to(file.fd.get(), text.size() + 1);
        current && *current == text)
      return dir;
  // Missing, or not whole: replaced at once (a reader sees the old file or the new one). A
  // directory or link in its place goes first, and so does the bytecode cache: a stale entry
  // there would be taken for the new file if both had the same size and second of change.
  if (file.not_regular) dir.remove_tree(kShimFile);
  dir.remove_tree("__pycache__");
  dir.write_file(kShimFile, text, 0600, util::Replace::kAllowed, util::Durability::kAtomicOnly);
  return dir;
}

}  // namespace

PythonShim PythonShim::create() {
  const std::string_view text = data::sitecustomize_py();
  if (auto parent = private_dir()) {
    try {
      parent->sweep_dead_owners(kPrivatePrefix);
      auto code = kept_shim(*parent, text);
      return PythonShim(std::move(*parent), std::nullopt, code.path());
    } catch (const util::FileError& e) {
      spdlog::debug("faulthandler shim: not kept: {}", e.what());
    }
  }
  // For this kernel alone, under a name no one can take first.
  auto shared = util::SafeDir::open(util::shared_temp_dir());
  shared.sweep_dead_owners(kSharedPrefix);
  util::SafeDir own =
      shared.make_unique_dir(std::string(kSharedPrefix) + std::to_string(::getpid()) + "-");
  own.write_file(kShimFile, text, 0600, util::Replace::kAllowed, util::Durability::kAtomicOnly);
  fs::path code = own.path();
  return PythonShim(std::move(shared), std::move(own), std::move(code));
}

util::SafeDir& PythonShim::own_dir() {
  if (!parent_) throw util::FileError("the shim directory is gone");
  if (!own_)
    own_ = parent_->make_unique_dir(std::string(kPrivatePrefix) + std::to_string(::getpid()) + "-");
  return *own_;
}

void PythonShim::add_notice(std::string_view notice_json) {
  // Lives as long as the kernel's start: nothing to keep through a crash of the machine.
  notice_ = own_dir().write_file("notice.json", notice_json, 0600, util::Replace::kAllowed,
                                 util::Durability::kAtomicOnly);
}

PythonShim::PythonShim(PythonShim&& other) noexcept
    : parent_(std::exchange(other.parent_, std::nullopt)),
      own_(std::exchange(other.own_, std::nullopt)),
      code_dir_(std::exchange(other.code_dir_, {})),
      notice_(std::exchange(other.notice_, {})) {}

PythonShim& PythonShim::operator=(PythonShim&& other) noexcept {
  if (this != &other) {
    remove();
    parent_ = std::exchange(other.parent_, std::nullopt);
    own_ = std::exchange(other.own_, std::nullopt);
    code_dir_ = std::exchange(other.code_dir_, {});
    notice_ = std::exchange(other.notice_, {});
  }
  return *this;
}

PythonShim::~PythonShim() {
  remove();
}

void PythonShim::apply(std::vector<std::string>& env) const {
  if (code_dir_.empty()) return;
  if (auto it = find_var(env, "PYTHONPATH"); it != env.end()) {
    const std::string old = it->substr(sizeof("PYTHONPATH"));
    *it = "PYTHONPATH=" + code_dir_.string() + (old.empty() ? "" : ":" + old);
  } else {
    env.push_back("PYTHONPATH=" + code_dir_.string());
    // Tells the shim to drop PYTHONPATH altogether rather than leave an empty one.
    env.emplace_back("KERNEL_WATCHDOG_PYTHONPATH_UNSET=1");
  }
  if (find_var(env, "PYTHONFAULTHANDLER") == env.end()) {
    env.emplace_back("PYTHONFAULTHANDLER=1");
    // Ours, not the user's: the shim removes it from the notebook's os.environ again.
    env.emplace_back("KERNEL_WATCHDOG_FAULTHANDLER_ADDED=1");
  }
  // Only the notice given here is shown, never one named by the environment we inherited.
  std::erase_if(env, [](const std::string& entry) { return sets(entry, kNoticeVariable); });
  if (!notice_.empty()) env.push_back(std::string(kNoticeVariable) + "=" + notice_.string());
}

void PythonShim::remove() noexcept {
  code_dir_.clear();
  notice_.clear();
  if (!own_ || !parent_) return;
  const std::string name = own_->path().filename().string();
  own_.reset();
  parent_->remove_tree(name);
}

}  // namespace kwd::faulthandler
