#pragma once

#include <cstddef>
#include <string_view>

#include "kwd/util/byte_ring.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::launch {

// The kernel's stderr goes through us: every byte is passed on to our own stderr unchanged
// (unless `passthrough` is false) and the last `capacity` bytes are kept for the report.
class StderrTee {
 public:
  explicit StderrTee(std::size_t capacity, bool passthrough = true);

  // The write end, for the child's fd 2; close it in the parent after spawning.
  util::UniqueFd take_child_end() { return std::move(child_end_); }
  [[nodiscard]] int fd() const { return read_end_.get(); }
  // Reads what is available without blocking; false once every writer has closed it.
  bool pump();
  // Bytes the kernel wrote to its stderr that reached us another way (recovered after its
  // death): kept and passed on as if they had come through the pipe.
  void inject(std::string_view bytes);
  // Bytes for the report's tail only (the faulthandler dump from the watchdog's own pipe):
  // the terminal keeps to the kernel's own output and the watchdog's one line.
  void keep_for_report(std::string_view bytes);
  [[nodiscard]] const util::ByteRing& tail() const { return ring_; }

 private:
  util::UniqueFd read_end_;
  util::UniqueFd child_end_;
  util::ByteRing ring_;
  bool passthrough_ok_ = true;
};

}  // namespace kwd::launch
