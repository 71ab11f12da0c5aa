#include "kwd/util/byte_ring.hpp"

#include <algorithm>

namespace kwd::util {

ByteRing::ByteRing(std::size_t capacity) : buffer_(std::max<std::size_t>(capacity, 1)) {}

void ByteRing::append(std::string_view bytes) {
  total_ += bytes.size();
  const std::size_t cap = buffer_.size();
  if (bytes.size() >= cap) {
    bytes = bytes.substr(bytes.size() - cap);
    std::copy(bytes.begin(), bytes.end(), buffer_.begin());
    head_ = 0;
    size_ = cap;
    return;
  }
  const std::size_t first = std::min(bytes.size(), cap - head_);
  std::copy_n(bytes.begin(), first, buffer_.begin() + static_cast<std::ptrdiff_t>(head_));
  std::copy(bytes.begin() + static_cast<std::ptrdiff_t>(first), bytes.end(), buffer_.begin());
  head_ = (head_ + bytes.size()) % cap;
  size_ = std::min(cap, size_ + bytes.size());
}

std::string ByteRing::contents() const {
  std::string out;
  out.reserve(size_);
  const std::size_t cap = buffer_.size();
  const std::size_t start = (head_ + cap - size_) % cap;
  for (std::size_t i = 0; i < size_; ++i)
    out.push_back(buffer_[(start + i) % cap]);
  return out;
}

}  // namespace kwd::util
