// The numbers in frameworks' out-of-memory messages, as printed (lines from public reports
// and from the H100 recordings in tests/fixtures/gpu).
#include <catch2/catch.hpp>

#include "kwd/diagnosis/oom_message.hpp"

using kwd::diagnosis::parse_oom_numbers;

namespace {
constexpr std::int64_t MiB = 1024 * 1024;
constexpr std::int64_t GiB = 1024 * MiB;
std::int64_t gib(double n) {
  return static_cast<std::int64_t>(n * static_cast<double>(GiB) + 0.5);
}
}  // namespace

TEST_CASE("PyTorch 2.x: request, capacity, free, this process and the other holders") {
  const auto n = parse_oom_numbers(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a "
      "total capacity of 79.19 GiB of which 3.06 GiB is free. Process 665 has 59.92 GiB memory "
      "in use. Including non-PyTorch memory, this process has 16.10 GiB memory in use. Of the "
      "allocated memory 15.50 GiB is allocated by PyTorch, and 122.00 MiB is reserved by "
      "PyTorch but unallocated.");
  CHECK(n.requested == gib(8.0));
  CHECK(n.capacity == gib(79.19));
  CHECK(n.free == gib(3.06));
  CHECK(n.this_process == gib(16.10));
  REQUIRE(n.holders.size() == 1);
  CHECK(n.holders[0].pid == 665);
  CHECK(n.holders[0].bytes == gib(59.92));
}

TEST_CASE("PyTorch 1.x: request, capacity and free in the older form") {
  const auto n = parse_oom_numbers(
      "RuntimeError: CUDA out of memory. Tried to allocate 1006.00 MiB (GPU 0; 10.91 GiB total "
      "capacity; 9.18 GiB already allocated; 569.81 MiB free; 9.49 GiB reserved in total by "
      "PyTorch)");
  CHECK(n.requested == 1006 * MiB);
  CHECK(n.free == static_cast<std::int64_t>(569.81 * MiB + 0.5));
  CHECK(n.holders.empty());
}

TEST_CASE("XLA: the bytes it tried to allocate; a line without numbers gives none") {
  const auto n = parse_oom_numbers(
      "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 285212672 bytes.");
  CHECK(n.requested == 285212672);
  CHECK_FALSE(n.capacity);
  CHECK_FALSE(parse_oom_numbers("CUDA error: an illegal memory access was encountered").any());
  CHECK_FALSE(parse_oom_numbers(std::string(100000, '9')).any());
}
