#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kwd/platform/root_view.hpp"

namespace kwd::fingerprint {

// An installed Python distribution, from its *.dist-info/METADATA or *.egg-info/PKG-INFO.
struct Distribution {
  std::string name;     // as the metadata spells it: "tensorflow-metal"
  std::string version;  // "1.1.0"
  std::filesystem::path metadata_dir;
  std::vector<std::string> top_level;  // import names it installs (top_level.txt)
};

// What a *.dist-info / *.egg-info directory name says ("tensorflow_metal-1.1.0.dist-info",
// "numpy-1.24.2.egg-info", "cryptography.egg-info"): the name, and the version if present.
std::optional<std::pair<std::string, std::string>> parse_metadata_dir_name(const std::string& name);

// Finds which installed distribution a loaded file belongs to, by looking at the metadata
// next to it in its site-packages / dist-packages directory. It reads as little as it can: a site
// directory is listed once, a distribution's files are read only when its directory name (or,
// failing that, its top_level.txt) makes it a candidate, and every answer is cached until the site
// directory changes (a distribution installed, upgraded or removed changes its mtime). It is called
// from each kernel's ReadWorker at once, and holds its lock for no read: a stalled mount under one
// kernel's site directory holds up that kernel's lookups only.
//
// Files are named as the kernel names them and read through its root (`root`): a kernel in
// a container has its own site directories. A site is known by its path and its directory's
// device and inode, so the kernels of one container (or of one host) share what was read, and
// kernels of two containers at the same path do not.
class PackageIndex {
 public:
  // The process's one index: the kernels a daemon watches mostly share their environments,
  // and a kernel that dies before its fingerprint was made would otherwise pay for reading a
  // site directory's metadata on its way to the report (2-3 ms for Debian's dist-packages).
  static PackageIndex& shared();

  // The distribution that installed `file`, if `file` lies in a site directory and one of
  // the distributions there claims it.
  std::optional<Distribution> owner_of(const platform::RootView& root, const std::string& file);
  std::optional<Distribution> owner_of(const std::string& file) {
    return owner_of(platform::RootView::host(), file);
  }
  // A distribution by name (normalised as pip does: case, '-', '_' and '.' are equal) in the
  // site directory of `beside` (a file in it).
  std::optional<Distribution> find(const platform::RootView& root, const std::string& beside,
                                   const std::string& name);
  std::optional<Distribution> find(const std::string& beside, const std::string& name) {
    return find(platform::RootView::host(), beside, name);
  }

  // "/x/site-packages/torch/lib/libc10.so" -> {"/x/site-packages", "torch/lib/libc10.so"}.
  static std::optional<std::pair<std::filesystem::path, std::string>> split_site(
      const std::string& file);
  static std::string normalise(std::string name);

  // Sites kept at most: those of containers long gone are forgotten, least recently used
  // first. A kernel keeps the answers about its own files (FingerprintProbe), so a site
  // forgotten while its kernels live costs a listing at their next import, not at a death.
  static constexpr std::size_t kSitesKept = 64;

 private:
  struct Entry {
    std::filesystem::path dir;            // as the kernel names it
    std::string normalised_name;          // from the directory name
    std::optional<Distribution> details;  // read when first needed (under mutex_)
    bool top_level_read = false;          // (under mutex_)
    std::vector<std::string> top_level;   // (under mutex_)
  };
  // A listing of a site directory: its entries are fixed once made; what they and `owners`
  // cache is filled in under mutex_. Held by its users, so a listing replaced meanwhile stays
  // whole for them.
  struct Site {
    std::int64_t modified_ns = -1;  // of the directory when it was listed
    std::uint64_t used = 0;         // use_count_ at its last use (under mutex_)
    std::vector<Entry> entries;
    std::map<std::string, std::optional<Distribution>> owners;  // file -> its distribution
  };
  // The site's listing, made again when the directory changed since; nullptr when the
  // directory is not there. Reads with no lock held.
  std::shared_ptr<Site> site(const platform::RootView& root, const std::filesystem::path& dir);
  // Each sets `unsure` when a file that is there could not be read (an I/O error, a stalled
  // mount): what follows from it is not remembered, and is looked at again next time.
  std::optional<Distribution> details(const platform::RootView& root, Entry& e, bool& unsure);
  std::vector<std::string> top_level(const platform::RootView& root, Entry& e, bool& unsure);
  std::mutex mutex_;
  struct SiteKey {
    dev_t dev;
    ino_t ino;
    std::string path;
    auto operator<=>(const SiteKey&) const = default;
  };
  std::map<SiteKey, std::shared_ptr<Site>> sites_;
  std::uint64_t use_count_ = 0;
};

// Name and Version from the header of a METADATA / PKG-INFO text.
std::optional<std::pair<std::string, std::string>> parse_metadata_header(const std::string& text);

}  // namespace kwd::fingerprint
