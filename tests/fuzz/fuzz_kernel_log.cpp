// /dev/kmsg records: any process that can write /dev/kmsg, and any driver, puts text there.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kwd/probes/linux/kernel_log.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwd::probes::linux_proc;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const auto record = parse_kmsg_record(text)) (void)parse_oom_line(record->message);
  (void)parse_oom_line(text);
  return 0;
}
