#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kwd/diagnosis/diagnose.hpp"

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

// A real report (an ipykernel segfault in cell [2]), completed as the supervisor completes it.
inline nlohmann::json recorded_segfault_report() {
  std::ifstream in(kDiagnosisFixtures / "recorded_segfault.json");
  nlohmann::json report = nlohmann::json::parse(in)["report"];
  diagnosis::complete_report(report);
  return report;
}

}  // namespace kwd::test
