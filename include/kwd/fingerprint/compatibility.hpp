#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kwd::fingerprint {

// -1, 0, 1 comparing dotted versions numerically part by part ("2.9" < "2.18"); a part's
// trailing letters ("0rc1") are ignored.
int compare_versions(std::string_view a, std::string_view b);

// Known-incompatible combinations (data/compatibility.json) among the distributions loaded
// (normalised name -> version), plus runtime conflicts seen in the loaded native libraries
// (two OpenMP runtimes). Each: {id, what, why, source}.
nlohmann::json find_incompatibilities(const std::map<std::string, std::string>& distributions,
                                      const std::vector<std::string>& native_library_names);
nlohmann::json find_incompatibilities(const std::map<std::string, std::string>& distributions,
                                      const std::vector<std::string>& native_library_names,
                                      std::string_view rules_json);

}  // namespace kwd::fingerprint
