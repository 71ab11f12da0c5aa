#include "kwd/diagnosis/report_view.hpp"

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

std::optional<std::int64_t> ReportView::integer(std::string_view pointer) const {
  const auto* v = find(pointer);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  if (v->is_number_float()) return static_cast<std::int64_t>(v->get<double>());
  return v->get<std::int64_t>();
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
