#include "kwd/platform/service_log.hpp"

namespace kwd::platform {

// launchd writes a job's stderr to the plist's StandardErrorPath: text there is what it
// keeps. (os_log would carry fields; not built.)
std::shared_ptr<spdlog::sinks::sink> service_log_sink() {
  return nullptr;
}

}  // namespace kwd::platform
