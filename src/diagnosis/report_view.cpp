#include "kwd/diagnosis/report_view.hpp"

#include <cstdint>

namespace kwd::diagnosis {

const nlohmann::json* ReportView::find(std::string_view pointer) const {
  try {
    const nlohmann::json::json_pointer ptr{std::string(pointer)};
    if (!report_.contains(ptr)) return nullptr;
    const auto& value = report_.at(ptr);
    return value.is_null() ? nullptr : &value;
  } catch (const nlohmann::json::exception&) {
    return nullptr;  // a malformed pointer or an array index on an object: not known
  }
}

std::optional<std::int64_t> integer_of(const nlohmann::json& v) {
  if (!v.is_number()) return std::nullopt;
  if (v.is_number_float()) {
    // Converting a double outside the int64 range (or NaN) is undefined: not known instead.
    const double d = v.get<double>();
    if (!(d >= -9.2e18 && d <= 9.2e18)) return std::nullopt;
    return static_cast<std::int64_t>(d);
  }
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    return std::nullopt;
  return v.get<std::int64_t>();
}

std::optional<std::int64_t> ReportView::integer(std::string_view pointer) const {
  const auto* v = find(pointer);
  return v == nullptr ? std::nullopt : integer_of(*v);
}

std::optional<double> ReportView::number(std::string_view pointer) const {
  const auto* v = find(pointer);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

std::optional<std::string> ReportView::text(std::string_view pointer) const {
  const auto* v = find(pointer);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

std::optional<std::string> ReportView::scalar(std::string_view pointer) const {
  const auto* v = find(pointer);
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number() || v->is_boolean()) return v->dump();
  return std::nullopt;
}

std::optional<ReportView> ReportView::object(std::string_view pointer) const {
  const auto* v = find(pointer);
  if (v == nullptr || !v->is_object()) return std::nullopt;
  return ReportView(*v);
}

bool ReportView::flag(std::string_view pointer) const {
  const auto* v = find(pointer);
  if (v == nullptr) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_number()) return v->get<double>() != 0.0;
  return false;
}

const nlohmann::json& ReportView::array(std::string_view pointer) const {
  static const nlohmann::json empty = nlohmann::json::array();
  const auto* v = find(pointer);
  return v != nullptr && v->is_array() ? *v : empty;
}

}  // namespace kwd::diagnosis
