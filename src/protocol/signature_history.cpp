#include "kwd/protocol/signature_history.hpp"

#include <algorithm>

namespace kwd::protocol {

SignatureHistory::SignatureHistory(std::size_t capacity)
    : ring_(std::max<std::size_t>(capacity, 1)) {
  seen_.reserve(ring_.size());
}

bool SignatureHistory::insert(std::string_view signature) {
  if (seen_.contains(signature)) return false;
  std::string& slot = ring_[next_];
  if (!slot.empty()) seen_.erase(slot);
  // Signatures have one length per scheme, so the slot's storage is reused, not reallocated,
  // and the views in `seen_` into other slots stay valid.
  slot.assign(signature);
  seen_.insert(slot);
  next_ = (next_ + 1) % ring_.size();
  return true;
}

}  // namespace kwd::protocol
