#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace kwd::diagnosis {

// Read-only, typed access to a report by JSON pointer. Reports come from several writers
// (and from disk): a missing section, a null or a field of an unexpected type all read as
// "not known", never as an exception.
class ReportView {
 public:
  explicit ReportView(const nlohmann::json& report) : report_(report) {}

  [[nodiscard]] const nlohmann::json& report() const { return report_; }
  // The value at `pointer`, or nullptr when absent or null.
  [[nodiscard]] const nlohmann::json* find(std::string_view pointer) const;
  [[nodiscard]] bool has(std::string_view pointer) const { return find(pointer) != nullptr; }
  [[nodiscard]] std::optional<std::int64_t> integer(std::string_view pointer) const;
  [[nodiscard]] std::optional<double> number(std::string_view pointer) const;
  [[nodiscard]] std::optional<std::string> text(std::string_view pointer) const;
  // true only for a JSON true (or a non-zero number).
  [[nodiscard]] bool flag(std::string_view pointer) const;
  // The array at `pointer`, or an empty array.
  [[nodiscard]] const nlohmann::json& array(std::string_view pointer) const;

 private:
  const nlohmann::json& report_;
};

}  // namespace kwd::diagnosis
