#include "kwd/logging/json_sink.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "kwd/logging/log_fields.hpp"

namespace kwd::logging {

std::string JsonLineSink::format_line(const spdlog::details::log_msg& msg) {
  const auto since_epoch = msg.time.time_since_epoch();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count();
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  nlohmann::json line = {{"time", fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", utc, ms % 1000)},
                         {"level", std::string(spdlog::level::to_string_view(msg.level).data(),
                                               spdlog::level::to_string_view(msg.level).size())},
                         {"pid", ::getpid()},
                         {"message", std::string(msg.payload.data(), msg.payload.size())}};
  for (const auto& [name, value] : LogFields::current())
    line[name] = value;
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void JsonLineSink::sink_it_(const spdlog::details::log_msg& msg) {
  const std::string text = format_line(msg) + "\n";
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a log that cannot be written must not stop the watchdog
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace kwd::logging
