#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <stdexcept>

#include "kwd/cli/commands.hpp"
#include "kwd/logging/json_sink.hpp"
#include "kwd/platform/service_log.hpp"

namespace kwd::cli {

void setup_logging(const std::string& level, const std::string& format) {
  // stderr, because the Jupyter server's log (the kernel's inherited stderr) is where users
  // look; stdout belongs to the kernel.
  spdlog::drop("kernel-watchdog");  // a command may set it up again with its own format
  std::shared_ptr<spdlog::logger> logger;
  if (format == "json") {
    logger = std::make_shared<spdlog::logger>("kernel-watchdog",
                                              std::make_shared<logging::JsonLineSink>(2));
  } else if (auto journal = format.empty() ? platform::service_log_sink() : nullptr) {
    logger = std::make_shared<spdlog::logger>("kernel-watchdog", std::move(journal));
  } else if (format.empty() || format == "text") {
    logger = spdlog::stderr_color_st("kernel-watchdog");
    logger->set_pattern("[kernel-watchdog %H:%M:%S.%e %^%l%$] %v");
  } else {
    throw std::invalid_argument("--log-format must be text or json, not '" + format + "'");
  }
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace kwd::cli
