#include "kwd/fingerprint/compatibility.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kwd/data/embedded_files.hpp"
#include "kwd/fingerprint/package_metadata.hpp"

namespace kwd::fingerprint {
namespace {

std::vector<long> version_parts(std::string_view v) {
  std::vector<long> parts;
  std::size_t i = 0;
  while (i < v.size()) {
    if (!std::isdigit(static_cast<unsigned char>(v[i]))) break;
    long n = 0;
    while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i])))
      n = n * 10 + (v[i++] - '0');
    parts.push_back(n);
    while (i < v.size() && v[i] != '.')
      ++i;  // "0rc1" counts as 0
    if (i < v.size()) ++i;
  }
  return parts;
}

// The clause's package among those loaded: its version, or nothing.
std::optional<std::pair<std::string, std::string>> clause_match(
    const nlohmann::json& clause, const std::map<std::string, std::string>& loaded) {
  for (const auto& name : clause.value("package", nlohmann::json::array())) {
    if (!name.is_string()) continue;
    auto it = loaded.find(PackageIndex::normalise(name.get<std::string>()));
    if (it == loaded.end()) continue;
    const auto& version = it->second;
    if (clause.contains("min") && compare_versions(version, clause["min"].get<std::string>()) < 0)
      continue;
    if (clause.contains("below") &&
        compare_versions(version, clause["below"].get<std::string>()) >= 0)
      continue;
    return std::make_pair(it->first, version);
  }
  return std::nullopt;
}

}  // namespace

int compare_versions(std::string_view a, std::string_view b) {
  const auto pa = version_parts(a), pb = version_parts(b);
  for (std::size_t i = 0; i < std::max(pa.size(), pb.size()); ++i) {
    const long x = i < pa.size() ? pa[i] : 0, y = i < pb.size() ? pb[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

nlohmann::json find_incompatibilities(const std::map<std::string, std::string>& distributions,
                                      const std::vector<std::string>& native_library_names,
                                      std::string_view rules_json) {
  auto found = nlohmann::json::array();
  std::map<std::string, std::string> loaded;
  for (const auto& [name, version] : distributions)
    loaded[PackageIndex::normalise(name)] = version;
  const auto doc = nlohmann::json::parse(rules_json, nullptr, false);
  if (doc.is_object() && doc.contains("rules") && doc["rules"].is_array())
    for (const auto& rule : doc["rules"]) {
      std::string seen;
      bool all = !rule.value("when", nlohmann::json::array()).empty();
      for (const auto& clause : rule.value("when", nlohmann::json::array())) {
        const auto match = clause_match(clause, loaded);
        if (!match) {
          all = false;
          break;
        }
        seen += (seen.empty() ? "" : ", ") + match->first + " " + match->second;
      }
      if (all)
        found.push_back({{"id", rule.value("id", "")},
                         {"what", rule.value("what", "")},
                         {"why", rule.value("why", "")},
                         {"found", seen},
                         {"source", rule.value("source", "")}});
    }
  // Intel's libiomp5 and LLVM's libomp share one code base and refuse to run side by side
  // (OMP: Error #15); two copies of either are the same problem.
  const auto kmp = std::count_if(
      native_library_names.begin(), native_library_names.end(), [](const std::string& n) {
        return n.starts_with("Intel OpenMP") || n.starts_with("LLVM OpenMP");
      });
  if (kmp > 1)
    found.push_back(
        {{"id", "openmp-duplicate-runtime"},
         {"what", "two Intel/LLVM OpenMP runtimes are loaded in one process"},
         {"why",
          "libiomp5 and libomp detect each other and abort (OMP: Error #15), or run with "
          "oversubscribed threads if the check is disabled."},
         {"found", std::to_string(kmp) + " OpenMP runtime copies"},
         {"source", "https://github.com/danaugrs/huskarl/issues/18"}});
  return found;
}

nlohmann::json find_incompatibilities(const std::map<std::string, std::string>& distributions,
                                      const std::vector<std::string>& native_library_names) {
  return find_incompatibilities(distributions, native_library_names, data::compatibility_json());
}

}  // namespace kwd::fingerprint
