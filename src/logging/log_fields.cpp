#include "kwd/logging/log_fields.hpp"

#include <algorithm>

namespace kwd::logging {
namespace {

std::vector<LogFields::Field>& open_fields() {
  thread_local std::vector<LogFields::Field> fields;
  return fields;
}

}  // namespace

LogFields::LogFields(std::vector<Field> fields) : added_(fields.size()) {
  auto& all = open_fields();
  for (auto& f : fields)
    all.push_back(std::move(f));
}

LogFields::~LogFields() {
  auto& all = open_fields();
  all.resize(all.size() - added_);
}

std::vector<LogFields::Field> LogFields::current() {
  std::vector<Field> out;
  for (const auto& field : open_fields()) {
    auto same = std::find_if(out.begin(), out.end(),
                             [&](const Field& f) { return f.first == field.first; });
    if (same == out.end())
      out.push_back(field);
    else
      same->second = field.second;
  }
  return out;
}

}  // namespace kwd::logging
