#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace kwd::diagnosis {

// The numbers a framework's out-of-memory message gives: PyTorch says how much it tried to
// allocate, the device's capacity, what was free, what this process held and what other
// processes held ("Process 665 has 59.92 GiB memory in use"); XLA says the bytes it tried
// to allocate. Sizes in bytes; what the line does not say stays empty.
struct OomNumbers {
  struct Holder {
    std::int64_t pid = 0;
    std::int64_t bytes = 0;
  };
  std::optional<std::int64_t> requested;
  std::optional<std::int64_t> capacity;
  std::optional<std::int64_t> free;
  std::optional<std::int64_t> this_process;
  std::vector<Holder> holders;  // "Process N has X memory in use", in the line's order
  [[nodiscard]] bool any() const {
    return requested || capacity || free || this_process || !holders.empty();
  }
};

OomNumbers parse_oom_numbers(std::string_view line);

}  // namespace kwd::diagnosis
