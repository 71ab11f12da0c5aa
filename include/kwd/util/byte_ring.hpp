#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kwd::util {

// Keeps the last `capacity` bytes written to it; memory is allocated once.
//
// Appends may carry the time they arrived. Those times are what lets a diagnosis tell an
// error the kernel survived (written during an earlier cell) from its last words: a line's
// time is the arrival time of its first byte.
class ByteRing {
 public:
  explicit ByteRing(std::size_t capacity);

  void append(std::string_view bytes);
  // The same, noting that these bytes arrived at `at_ms` (wall clock, ms).
  void append(std::string_view bytes, std::int64_t at_ms);
  // The retained bytes, oldest first.
  [[nodiscard]] std::string contents() const;
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return buffer_.size(); }
  // Everything ever appended, including what has been overwritten.
  [[nodiscard]] std::uint64_t total_bytes() const noexcept { return total_; }

  // For contents(): {byte offset, arrival ms}, ascending; the bytes from each offset up to
  // the next arrived at that time. Empty when no retained append carried a time.
  [[nodiscard]] std::vector<std::pair<std::size_t, std::int64_t>> arrival_times() const;

 private:
  struct Arrival {
    std::uint64_t offset;  // total_ before the append
    std::int64_t at_ms;
  };
  // Bounded: appends within kCoalesceMs of the previous one share its entry.
  static constexpr std::size_t kMaxArrivals = 512;
  static constexpr std::int64_t kCoalesceMs = 5;

  std::vector<char> buffer_;
  std::size_t head_ = 0;  // next write position
  std::size_t size_ = 0;
  std::uint64_t total_ = 0;
  std::deque<Arrival> arrivals_;
};

}  // namespace kwd::util
