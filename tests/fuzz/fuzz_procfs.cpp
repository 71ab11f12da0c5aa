// /proc/PID/stat, /proc/PID/statm, /proc/PID/status, /proc/meminfo, smaps_rollup: text the
// kernel writes, but comm (in stat and status) is whatever the process named itself.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kwd/platform/linux/procfs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwd::platform::linux_proc;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)parse_proc_stat(text);
  (void)parse_statm_resident(text);
  for (std::string_view key : {"VmRSS", "VmSwap", "Threads", "MemTotal", "MemAvailable",
                               "SwapTotal", "SwapFree", "Pss", "Rss", "Swap", "SwapPss"})
    (void)find_kb_field(text, key);
  // A key from the input itself: the first line up to its colon.
  (void)find_kb_field(text, text.substr(0, text.find(':')));
  return 0;
}
