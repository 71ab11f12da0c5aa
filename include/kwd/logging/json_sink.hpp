#pragma once

#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>

#include <mutex>
#include <string>

namespace kwd::logging {

// One JSON object per line on a file descriptor (stderr), for log shippers that read JSON:
// {"time":"2026-11-25T07:01:02.123Z","level":"warn","pid":1234,"message":"…"} plus the
// open LogFields ("kernel_id", "cause", "report"). Bytes that are not UTF-8 are replaced,
// never dropped with the line. Each line is one write(2), so lines from two processes
// sharing the descriptor do not interleave.
class JsonLineSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit JsonLineSink(int fd) : fd_(fd) {}

  // The line a record becomes (without its newline); public for the tests.
  static std::string format_line(const spdlog::details::log_msg& msg);

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override {}

 private:
  int fd_;
};

}  // namespace kwd::logging
