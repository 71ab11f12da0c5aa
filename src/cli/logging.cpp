#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "kwd/cli/commands.hpp"

namespace kwd::cli {

void setup_logging(const std::string& level) {
  // stderr, because the Jupyter server's log (the kernel's inherited stderr) is where users
  // look; stdout belongs to the kernel.
  auto logger = spdlog::stderr_color_st("kernel-watchdog");
  logger->set_pattern("[kernel-watchdog %H:%M:%S.%e %^%l%$] %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace kwd::cli
