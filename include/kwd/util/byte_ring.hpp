#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kwd::util {

// Keeps the last `capacity` bytes written to it; memory is allocated once.
class ByteRing {
 public:
  explicit ByteRing(std::size_t capacity);

  void append(std::string_view bytes);
  // The retained bytes, oldest first.
  [[nodiscard]] std::string contents() const;
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return buffer_.size(); }
  // Everything ever appended, including what has been overwritten.
  [[nodiscard]] std::uint64_t total_bytes() const noexcept { return total_; }

 private:
  std::vector<char> buffer_;
  std::size_t head_ = 0;  // next write position
  std::size_t size_ = 0;
  std::uint64_t total_ = 0;
};

}  // namespace kwd::util
