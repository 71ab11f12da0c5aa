#include "kwd/daemon/service_plan.hpp"

namespace kwd::daemon {

std::string fill_template(std::string text, const std::string& key, const std::string& value) {
  for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

}  // namespace kwd::daemon
