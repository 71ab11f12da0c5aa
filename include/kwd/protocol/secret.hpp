#pragma once

#include <string>
#include <string_view>

namespace kwd::protocol {

// Bytes that must never be printed: the connection key, a CurveZMQ secret key. There is no
// formatter or stream operator on purpose, so a log line cannot show one by accident; the
// bytes are wiped when the last copy goes away.
class Secret {
 public:
  Secret() = default;
  explicit Secret(std::string bytes) noexcept : bytes_(std::move(bytes)) {}
  Secret(const Secret& other) = default;
  Secret& operator=(const Secret& other);
  Secret(Secret&& other) noexcept;
  Secret& operator=(Secret&& other) noexcept;
  ~Secret();

  [[nodiscard]] bool empty() const noexcept { return bytes_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_.size(); }
  // The one way to the bytes; a call to it is where a reviewer looks.
  [[nodiscard]] std::string_view reveal() const noexcept { return bytes_; }

 private:
  void wipe() noexcept;
  std::string bytes_;
};

// Overwrites a string's bytes (util::wipe: stores that cannot be optimised away), then empties it.
void wipe_string(std::string& text) noexcept;

}  // namespace kwd::protocol
