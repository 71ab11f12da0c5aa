#include "kwd/fingerprint/package_metadata.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <sstream>

namespace kwd::fingerprint {
namespace fs = std::filesystem;
namespace {

// The kernel's environment is read while the kernel runs and as it dies: what is read is
// bounded (RootView reads regular files only). METADATA headers come first; the long
// description after them can be large. A RECORD lists every file of a distribution (torch's:
// about 2 MB). "" when the file is not there, a fact; nullopt when it is there and was not
// read (an I/O error, a stalled mount, something else in its place for now), which is not.
std::optional<std::string> read_head(const platform::RootView& root, const fs::path& file,
                                     std::size_t limit = 16 * 1024) {
  auto read = root.read_file(file.string(), limit);
  if (read.text) return std::move(read.text);
  if (read.missing) return std::string();
  return std::nullopt;
}

std::optional<std::string> read_all(const platform::RootView& root, const fs::path& file) {
  return read_head(root, file, std::size_t{64} << 20);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
      line.pop_back();
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

}  // namespace

std::optional<std::pair<std::string, std::string>> parse_metadata_header(const std::string& text) {
  std::string name, version;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) break;  // end of the headers
    if (line.starts_with("Name:")) name = line.substr(5);
    if (line.starts_with("Version:")) version = line.substr(8);
  }
  auto trim = [](std::string& s) {
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
  };
  trim(name);
  trim(version);
  if (name.empty() || version.empty()) return std::nullopt;
  return std::make_pair(name, version);
}

std::string PackageIndex::normalise(std::string name) {
  std::string out;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (out.empty() || out.back() != '-') out.push_back('-');
    } else {
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  return out;
}

std::optional<std::pair<fs::path, std::string>> PackageIndex::split_site(const std::string& file) {
  for (const char* marker : {"/site-packages/", "/dist-packages/"}) {
    const auto at = file.rfind(marker);
    if (at == std::string::npos) continue;
    const std::size_t site_end = at + std::char_traits<char>::length(marker) - 1;
    return std::make_pair(fs::path(file.substr(0, site_end)), file.substr(site_end + 1));
  }
  return std::nullopt;
}

std::optional<std::pair<std::string, std::string>> parse_metadata_dir_name(const std::string& dir) {
  std::string stem;
  for (const char* suffix : {".dist-info", ".egg-info"})
    if (dir.size() > std::strlen(suffix) && dir.ends_with(suffix))
      stem = dir.substr(0, dir.size() - std::strlen(suffix));
  if (stem.empty()) return std::nullopt;
  // name-version[-pyX.Y]: names never contain '-' here (wheels escape it to '_'), versions
  // start with a digit.
  const auto dash = stem.find('-');
  if (dash == std::string::npos) return std::make_pair(stem, std::string());
  std::string version = stem.substr(dash + 1);
  if (auto py = version.find("-py"); py != std::string::npos) version.resize(py);
  if (version.empty() || !std::isdigit(static_cast<unsigned char>(version[0]))) version.clear();
  return std::make_pair(stem.substr(0, dash), version);
}

PackageIndex& PackageIndex::shared() {
  static PackageIndex index;
  return index;
}

std::shared_ptr<PackageIndex::Site> PackageIndex::site(const platform::RootView& root,
                                                       const fs::path& dir) {
  const auto looked = root.stat(dir.string());
  if (!looked || !looked->directory) return nullptr;
  const SiteKey key{looked->dev, looked->ino, dir.string()};
  {
    const std::lock_guard lock(mutex_);
    if (const auto known = sites_.find(key); known != sites_.end() &&
                                             known->second->modified_ns == looked->modified_ns &&
                                             looked->modified_ns >= 0) {
      known->second->used = ++use_count_;
      return known->second;
    }
  }
  // Listed with no lock held: a site whose file system stalls holds up only the thread that
  // lists it, never another kernel's lookups in a site that answers.
  auto listed = std::make_shared<Site>();
  listed->modified_ns = looked->modified_ns;
  for (const auto& name : root.list(dir.string())) {
    const auto parsed = parse_metadata_dir_name(name);
    if (!parsed) continue;
    listed->entries.push_back({dir / name, normalise(parsed->first), std::nullopt, false, {}});
  }
  const std::lock_guard lock(mutex_);
  if (!sites_.contains(key) && sites_.size() >= kSitesKept)
    sites_.erase(std::min_element(sites_.begin(), sites_.end(), [](const auto& a, const auto& b) {
      return a.second->used < b.second->used;
    }));
  auto& kept = sites_[key];
  // Another thread listed the same state of the site meanwhile: its answers are kept.
  if (!kept || kept->modified_ns != listed->modified_ns) kept = std::move(listed);
  kept->used = ++use_count_;
  return kept;
}

std::optional<Distribution> PackageIndex::details(const platform::RootView& root, Entry& e,
                                                  bool& unsure) {
  {
    const std::lock_guard lock(mutex_);
    if (e.details) return e.details;
  }
  const auto what = root.stat(e.dir.string());
  const bool is_dir = what && what->directory;
  const bool dist_info = e.dir.filename().string().ends_with(".dist-info");
  // An egg-info that is a file is the PKG-INFO itself.
  const fs::path metadata = is_dir ? e.dir / (dist_info ? "METADATA" : "PKG-INFO") : e.dir;
  const auto text = read_head(root, metadata);
  if (!text) unsure = true;
  const auto header = parse_metadata_header(text.value_or(std::string()));
  if (!header) return std::nullopt;
  Distribution d;
  d.name = header->first;
  d.version = header->second;
  d.metadata_dir = e.dir;
  bool top_level_unsure = false;
  d.top_level = top_level(root, e, top_level_unsure);
  if (top_level_unsure) {  // this answer, not kept: the next question reads again
    unsure = true;
    return d;
  }
  const std::lock_guard lock(mutex_);
  e.details = d;
  return d;
}

std::vector<std::string> PackageIndex::top_level(const platform::RootView& root, Entry& e,
                                                 bool& unsure) {
  {
    const std::lock_guard lock(mutex_);
    if (e.top_level_read) return e.top_level;
  }
  // An egg-info that is a file has none: the read finds nothing there.
  const auto text = read_head(root, e.dir / "top_level.txt");
  if (!text) {
    unsure = true;
    return {};
  }
  auto names = lines_of(*text);
  const std::lock_guard lock(mutex_);
  e.top_level_read = true;
  e.top_level = names;
  return names;
}

std::optional<Distribution> PackageIndex::owner_of(const platform::RootView& root,
                                                   const std::string& file) {
  const auto split = split_site(file);
  if (!split) return std::nullopt;
  const auto where = site(root, split->first);
  if (!where) return std::nullopt;
  {
    const std::lock_guard lock(mutex_);
    if (auto it = where->owners.find(file); it != where->owners.end()) return it->second;
  }
  std::optional<Distribution> owner;
  bool unsure = false;
  {
    const auto& relative = split->second;
    const std::string top = relative.substr(0, relative.find('/'));
    std::string top_module = top;
    if (auto dot = top_module.find('.'); dot != std::string::npos)
      top_module = top_module.substr(0, dot);  // "_cffi_backend.cpython-311-....so"
    // A listing's entries are fixed once it is made (only what each caches fills in).
    auto& entries = where->entries;
    std::vector<Entry*> candidates;
    // Cheap first: a distribution named like the package ("numpy" installs numpy/).
    for (auto& e : entries)
      if (e.normalised_name == normalise(top_module)) candidates.push_back(&e);
    // Else (sklearn from scikit-learn, zmq from pyzmq, nvidia/ from many wheels): the
    // top_level.txt files, small and read once per distribution.
    if (candidates.empty())
      for (auto& e : entries) {
        const auto names = top_level(root, e, unsure);
        if (std::find(names.begin(), names.end(), top_module) != names.end() &&
            std::find(candidates.begin(), candidates.end(), &e) == candidates.end())
          candidates.push_back(&e);
      }
    if (candidates.size() == 1) {
      owner = details(root, *candidates.front(), unsure);
    } else if (candidates.size() > 1) {
      // A shared namespace: the one whose RECORD lists the file installed it.
      for (auto* e : candidates) {
        const auto record = read_all(root, e->dir / "RECORD");
        if (!record) unsure = true;
        if (record && record->find(relative + ",") != std::string::npos) {
          owner = details(root, *e, unsure);
          break;
        }
      }
    }
  }
  // What could not be read is looked at again next time, not remembered as "no owner".
  if (!unsure) {
    const std::lock_guard lock(mutex_);
    where->owners.emplace(file, owner);
  }
  return owner;
}

std::optional<Distribution> PackageIndex::find(const platform::RootView& root,
                                               const std::string& beside, const std::string& name) {
  const auto split = split_site(beside);
  if (!split) return std::nullopt;
  const auto where = site(root, split->first);
  if (!where) return std::nullopt;
  for (auto& e : where->entries)
    if (e.normalised_name == normalise(name)) {
      bool unsure = false;
      return details(root, e, unsure);
    }
  return std::nullopt;
}

}  // namespace kwd::fingerprint
