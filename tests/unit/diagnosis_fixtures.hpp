#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace kwd::test {

// Recorded reports that the diagnosis is held to (tests/fixtures/diagnosis/).
inline const std::filesystem::path kDiagnosisFixtures =
    std::filesystem::path(KWD_SOURCE_DIR) / "tests" / "fixtures" / "diagnosis";

// The remedy of a diagnosis with this id, or nullptr.
inline const nlohmann::json* remedy(const nlohmann::json& diagnosis, const std::string& id) {
  for (const auto& r : diagnosis["remedies"])
    if (r["id"] == id) return &r;
  return nullptr;
}

}  // namespace kwd::test
