#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kwd::fingerprint {

// An installed Python distribution, from its *.dist-info/METADATA or *.egg-info/PKG-INFO.
struct Distribution {
  std::string name;     // as the metadata spells it: "tensorflow-metal"
  std::string version;  // "1.1.0"
  std::filesystem::path metadata_dir;
  std::vector<std::string> top_level;  // import names it installs (top_level.txt)
};

// Finds which installed distribution a loaded file belongs to, by looking at the metadata
// next to it in its site-packages / dist-packages directory. Directory listings and answers
// are cached: the same files are asked about on every refresh.
class PackageIndex {
 public:
  // The distribution that installed `file`, if `file` lies in a site directory and one of
  // the distributions there claims it.
  std::optional<Distribution> owner_of(const std::string& file);
  // A distribution by name (normalised as pip does: case, '-', '_' and '.' are equal) in the
  // site directory of `beside` (a file in it).
  std::optional<Distribution> find(const std::string& beside, const std::string& name);

  // "/x/site-packages/torch/lib/libc10.so" -> {"/x/site-packages", "torch/lib/libc10.so"}.
  static std::optional<std::pair<std::filesystem::path, std::string>> split_site(
      const std::string& file);
  static std::string normalise(std::string name);

 private:
  const std::vector<Distribution>& distributions_in(const std::filesystem::path& site);
  std::map<std::filesystem::path, std::vector<Distribution>> sites_;
  std::map<std::string, std::optional<Distribution>> owners_;
};

// Name and Version from the header of a METADATA / PKG-INFO text.
std::optional<std::pair<std::string, std::string>> parse_metadata_header(const std::string& text);

}  // namespace kwd::fingerprint
