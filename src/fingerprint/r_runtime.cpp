#include "kwd/fingerprint/r_runtime.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>

namespace kwd::fingerprint {
namespace {

constexpr std::size_t kDescriptionMax = 64 * 1024;

std::string_view file_name(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string_view parent(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view{} : path.substr(0, slash);
}

}  // namespace

std::optional<std::string> dcf_field(const std::string& text, const std::string& field) {
  const std::string key = field + ":";
  std::size_t at = 0;
  while (at < text.size()) {
    const auto end = std::min(text.find('\n', at), text.size());
    const std::string_view line(text.data() + at, end - at);
    if (line.starts_with(key)) {
      std::string_view value = line.substr(key.size());
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
        value.remove_prefix(1);
      while (!value.empty() &&
             (value.back() == ' ' || value.back() == '\r' || value.back() == '\t'))
        value.remove_suffix(1);
      if (value.empty()) return std::nullopt;
      return std::string(value);
    }
    at = end + 1;
  }
  return std::nullopt;
}

std::optional<std::string> r_package_dir(const std::string& file) {
  if (!file.ends_with(".so")) return std::nullopt;
  const std::string_view libs = parent(file);
  if (file_name(libs) != "libs") return std::nullopt;
  const std::string_view package = parent(libs);
  if (package.empty() || file_name(package).empty()) return std::nullopt;
  return std::string(package);
}

std::optional<RRuntime> find_r_runtime(const platform::RootView& root,
                                       const std::vector<std::string>& files) {
  const auto libr = std::find_if(files.begin(), files.end(), [](const std::string& f) {
    return file_name(f) == "libR.so" && file_name(parent(f)) == "lib";
  });
  if (libr == files.end()) return std::nullopt;
  RRuntime r;
  r.home = std::string(parent(parent(*libr)));
  if (auto text = root.read(r.home + "/library/base/DESCRIPTION", kDescriptionMax))
    r.version = dcf_field(*text, "Version").value_or("");
  std::map<std::string, RPackage> by_dir;
  for (const auto& f : files) {
    const auto dir = r_package_dir(f);
    // R's own shared objects (R_HOME/lib, R_HOME/modules) are not packages; base R's packages
    // with native code (stats, utils, grDevices...) are, in R_HOME/library.
    if (!dir || by_dir.contains(*dir)) continue;
    RPackage p;
    p.path = *dir;
    p.name = std::string(file_name(*dir));
    if (auto text = root.read(*dir + "/DESCRIPTION", kDescriptionMax)) {
      // Only a directory whose DESCRIPTION says it is this package counts as one.
      const auto name = dcf_field(*text, "Package");
      if (!name || *name != p.name) continue;
      p.version = dcf_field(*text, "Version").value_or("");
    }
    by_dir.emplace(*dir, std::move(p));
  }
  for (auto& [dir, p] : by_dir)
    r.packages.push_back(std::move(p));
  std::sort(r.packages.begin(), r.packages.end(),
            [](const RPackage& a, const RPackage& b) { return a.name < b.name; });
  return r;
}

nlohmann::json to_json(const RRuntime& r) {
  auto packages = nlohmann::json::array();
  for (const auto& p : r.packages)
    packages.push_back(
        {{"name", p.name},
         {"version", p.version.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.version)},
         {"path", p.path}});
  return {{"home", r.home},
          {"version", r.version.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.version)},
          {"packages_with_native_code", std::move(packages)}};
}

}  // namespace kwd::fingerprint
