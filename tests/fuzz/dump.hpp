#pragma once

// A document written out as the report writer does (src/report/report_document.cpp): a string
// cut inside a UTF-8 sequence (texts are capped by bytes) is written with U+FFFD, not refused.
#include <nlohmann/json.hpp>
#include <string>

namespace kwd::fuzz {

inline std::string dump(const nlohmann::json& document) {
  return document.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kwd::fuzz
