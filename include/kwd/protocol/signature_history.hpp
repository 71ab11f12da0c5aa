#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace kwd::protocol {

// The last N signatures seen, so a replayed message (a valid signature sent twice) is
// refused, as jupyter_client's Session does with its digest history. Fixed memory.
class SignatureHistory {
 public:
  explicit SignatureHistory(std::size_t capacity);
  // Remembers `signature`; false if it is already remembered (a replay).
  bool insert(std::string_view signature);
  [[nodiscard]] std::size_t size() const noexcept { return seen_.size(); }

 private:
  std::vector<std::string> ring_;  // insertion order, to forget the oldest
  std::size_t next_ = 0;
  std::unordered_set<std::string_view> seen_;  // views into ring_
};

}  // namespace kwd::protocol
