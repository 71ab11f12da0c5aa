#pragma once

#include <cstdint>
#include <optional>

#include "kwd/diagnosis/findings.hpp"

namespace kwd::diagnosis {

// The advice for a /dev/shm too small for what is shared through it, given for a kernel that
// died of it (remedies.cpp) and for a cell whose DataLoader worker did (cell_failure.cpp).
Remedy larger_dev_shm(std::optional<std::int64_t> size_bytes);
Remedy torch_shares_less();

}  // namespace kwd::diagnosis
