// Pressure stall information: /proc/pressure/memory and a v2 cgroup's memory.pressure.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kwd/probes/linux/pressure.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)kwd::probes::linux_proc::parse_pressure(text);
  return 0;
}
