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

void ByteRing::append(std::string_view bytes, std::int64_t at_ms) {
  if (!bytes.empty() && (arrivals_.empty() || at_ms < arrivals_.back().at_ms ||
                         at_ms - arrivals_.back().at_ms >= kCoalesceMs)) {
    arrivals_.push_back({total_, at_ms});
    // The oldest entries describe bytes long overwritten, or are the least precise loss.
    const std::uint64_t retained_from =
        total_ + bytes.size() > buffer_.size() ? total_ + bytes.size() - buffer_.size() : 0;
    while (arrivals_.size() > kMaxArrivals ||
           (arrivals_.size() > 1 && arrivals_[1].offset <= retained_from))
      arrivals_.pop_front();
  }
  append(bytes);
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

std::vector<std::pair<std::size_t, std::int64_t>> ByteRing::arrival_times() const {
  std::vector<std::pair<std::size_t, std::int64_t>> out;
  const std::uint64_t first_offset = total_ - size_;
  for (std::size_t i = 0; i < arrivals_.size(); ++i) {
    const bool covers_retained =
        i + 1 == arrivals_.size() || arrivals_[i + 1].offset > first_offset;
    if (!covers_retained || arrivals_[i].offset >= total_) continue;
    const std::uint64_t from = std::max(arrivals_[i].offset, first_offset) - first_offset;
    out.emplace_back(static_cast<std::size_t>(from), arrivals_[i].at_ms);
  }
  return out;
}

}  // namespace kwd::util
