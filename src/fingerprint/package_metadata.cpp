#include "kwd/fingerprint/package_metadata.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace kwd::fingerprint {
namespace fs = std::filesystem;
namespace {

// METADATA headers come first; the long description after them can be large.
std::string read_head(const fs::path& file, std::size_t limit = 16 * 1024) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return {};
  std::string text(limit, '\0');
  in.read(text.data(), static_cast<std::streamsize>(limit));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

std::string read_all(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
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

const std::vector<Distribution>& PackageIndex::distributions_in(const fs::path& site) {
  if (auto it = sites_.find(site); it != sites_.end()) return it->second;
  std::vector<Distribution> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(site, ec)) {
    const std::string name = entry.path().filename().string();
    const bool dist_info = name.ends_with(".dist-info");
    const bool egg_info = name.ends_with(".egg-info");
    if (!dist_info && !egg_info) continue;
    fs::path metadata;
    if (entry.is_directory(ec))
      metadata = entry.path() / (dist_info ? "METADATA" : "PKG-INFO");
    else if (egg_info)
      metadata = entry.path();  // an egg-info file is the PKG-INFO itself
    else
      continue;
    const auto header = parse_metadata_header(read_head(metadata));
    if (!header) continue;
    Distribution d;
    d.name = header->first;
    d.version = header->second;
    d.metadata_dir = entry.path();
    if (entry.is_directory(ec)) d.top_level = lines_of(read_head(entry.path() / "top_level.txt"));
    found.push_back(std::move(d));
  }
  return sites_.emplace(site, std::move(found)).first->second;
}

std::optional<Distribution> PackageIndex::owner_of(const std::string& file) {
  if (auto it = owners_.find(file); it != owners_.end()) return it->second;
  std::optional<Distribution> owner;
  if (const auto split = split_site(file)) {
    const auto& [site, relative] = *split;
    const std::string top = relative.substr(0, relative.find('/'));
    std::string top_module = top;
    if (auto dot = top_module.find('.'); dot != std::string::npos)
      top_module = top_module.substr(0, dot);  // "_cffi_backend.cpython-311-....so"
    std::vector<const Distribution*> candidates;
    for (const auto& d : distributions_in(site)) {
      const bool claims =
          std::find(d.top_level.begin(), d.top_level.end(), top_module) != d.top_level.end() ||
          normalise(d.name) == normalise(top_module);
      if (claims) candidates.push_back(&d);
    }
    if (candidates.size() == 1) {
      owner = *candidates.front();
    } else if (candidates.size() > 1) {
      // A shared namespace ("nvidia" holds every nvidia-*-cu12 wheel): the one whose RECORD
      // lists the file installed it.
      for (const auto* d : candidates) {
        const auto record = read_all(d->metadata_dir / "RECORD");
        if (record.find(relative + ",") != std::string::npos) {
          owner = *d;
          break;
        }
      }
    }
  }
  owners_.emplace(file, owner);
  return owner;
}

std::optional<Distribution> PackageIndex::find(const std::string& beside, const std::string& name) {
  const auto split = split_site(beside);
  if (!split) return std::nullopt;
  for (const auto& d : distributions_in(split->first))
    if (normalise(d.name) == normalise(name)) return d;
  return std::nullopt;
}

}  // namespace kwd::fingerprint
