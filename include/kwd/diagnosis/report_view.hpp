#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace kwd::diagnosis {

// Read-only, typed access to a report by JSON pointer. Reports come from several writers
// (and from disk): a missing section, a null or a field of an unexpected type all read as
// "not known", never as an exception. A view can be taken of any value, e.g. one item of an
// array (ReportView(item).text("/fact")); it refers to that value and must not outlive it.
// A JSON value as a whole number that fits in 64 bits (a fraction cut off); nullopt for
// anything else. Never a conversion of an out-of-range double (undefined behaviour).
std::optional<std::int64_t> integer_of(const nlohmann::json& value);

class ReportView {
 public:
  explicit ReportView(const nlohmann::json& report) : report_(report) {}

  [[nodiscard]] const nlohmann::json& report() const { return report_; }
  // The value at `pointer` ("" is the whole document), or nullptr when absent or null.
  [[nodiscard]] const nlohmann::json* find(std::string_view pointer) const;
  [[nodiscard]] bool has(std::string_view pointer) const { return find(pointer) != nullptr; }
  // A whole number that fits in 64 bits (a fraction is cut off); nullopt for anything else.
  [[nodiscard]] std::optional<std::int64_t> integer(std::string_view pointer) const;
  [[nodiscard]] std::optional<double> number(std::string_view pointer) const;
  [[nodiscard]] std::optional<std::string> text(std::string_view pointer) const;
  // A string as it is, a number or a boolean as JSON writes it; nullopt for anything else.
  [[nodiscard]] std::optional<std::string> scalar(std::string_view pointer) const;
  // The object at `pointer` (a view of it), or nullopt.
  [[nodiscard]] std::optional<ReportView> object(std::string_view pointer) const;
  // true only for a JSON true (or a non-zero number).
  [[nodiscard]] bool flag(std::string_view pointer) const;
  // The array at `pointer`, or an empty array.
  [[nodiscard]] const nlohmann::json& array(std::string_view pointer) const;

 private:
  const nlohmann::json& report_;
};

}  // namespace kwd::diagnosis
