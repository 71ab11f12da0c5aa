#include "kwd/protocol/secret.hpp"

#include "kwd/util/wipe.hpp"

namespace kwd::protocol {

void wipe_string(std::string& text) noexcept {
  // Growing to the capacity (no reallocation) makes every byte that ever held the secret
  // part of the string, including a short-string buffer a move left behind.
  text.resize(text.capacity());
  if (!text.empty()) util::wipe(text.data(), text.size());
  text.clear();
}

Secret& Secret::operator=(const Secret& other) {
  if (this != &other) {
    wipe();
    bytes_ = other.bytes_;
  }
  return *this;
}

Secret::Secret(Secret&& other) noexcept : bytes_(std::move(other.bytes_)) {
  other.wipe();
}

Secret& Secret::operator=(Secret&& other) noexcept {
  if (this != &other) {
    wipe();
    bytes_ = std::move(other.bytes_);
    other.wipe();
  }
  return *this;
}

Secret::~Secret() {
  wipe();
}

void Secret::wipe() noexcept {
  wipe_string(bytes_);
}

}  // namespace kwd::protocol
