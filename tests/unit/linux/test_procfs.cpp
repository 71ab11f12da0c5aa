#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "kwd/platform/linux/procfs.hpp"

using namespace kwd::platform::linux_proc;

TEST_CASE("parse_proc_stat survives spaces and parentheses in comm") {
  const std::string text =
      "4242 (my (odd) proc) S 1000 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 7 0 "
      "123456 1000000 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  const auto st = parse_proc_stat(text);
  REQUIRE(st);
  CHECK(st->pid == 4242);
  CHECK(st->comm == "my (odd) proc");
  CHECK(st->state == 'S');
  CHECK(st->ppid == 1000);
  CHECK(st->threads == 7);
  CHECK(st->start_time == 123456);
  CHECK(st->vsize == 1000000);
  CHECK(st->rss_pages == 2560);
  CHECK_FALSE(st->exit_code);  // a kernel older than 3.5 has no field 52
  // A zombie killed by SIGSEGV (wait status 11), fields 23 to 51 elided as zeros.
  std::string zombie = "77 (python3) Z 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 555 0 0";
  for (int field = 25; field <= 51; ++field)
    zombie += " 0";
  const auto z = parse_proc_stat(zombie + " 11\n");
  REQUIRE(z);
  CHECK(z->state == 'Z');
  CHECK(z->exit_code == 11);
  CHECK_FALSE(parse_proc_stat("garbage"));
  CHECK_FALSE(parse_proc_stat("12 (x) S 1 2"));
}

TEST_CASE("parse_proc_stat reads this very process") {
  const auto text = read_small_file("/proc/self/stat");
  REQUIRE(text);
  const auto st = parse_proc_stat(*text);
  REQUIRE(st);
  CHECK(st->pid == ::getpid());
  CHECK(st->ppid == ::getppid());
  CHECK(st->rss_pages > 0);
  CHECK(st->exit_code == 0);  // running: no wait status yet
}

TEST_CASE("find_kb_field reads kB lines as bytes") {
  const std::string status =
      "Name:\tpython3\nVmRSS:\t  1024 kB\nVmSwap:\t       0 kB\nThreads:\t4\n";
  CHECK(find_kb_field(status, "VmRSS") == 1024 * 1024);
  CHECK(find_kb_field(status, "VmSwap") == 0);
  CHECK(find_kb_field(status, "Threads") == 4);
  CHECK_FALSE(find_kb_field(status, "VmRS"));
  CHECK_FALSE(find_kb_field(status, "Missing"));
  // Found by tests/fuzz/fuzz_procfs.cpp: kB beyond what bytes in an int64 can say overflowed.
  CHECK_FALSE(find_kb_field("VmRSS:\t24677777777783620 kB\n", "VmRSS"));
  CHECK(find_kb_field("VmRSS:\t24677777777783620\n", "VmRSS") == 24677777777783620);
}

TEST_CASE("pread_to_end reads a file of many records whole, which one read does not") {
  // Two hundred mappings of alternating protection (not merged): /proc/self/maps grows past
  // several pages, and procfs hands it out about a page per read.
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<void*> maps;
  for (int i = 0; i < 200; ++i)
    maps.push_back(::mmap(nullptr, static_cast<std::size_t>(page),
                          i % 2 == 0 ? PROT_READ : PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  std::string whole_buf, once_buf;
  whole_buf.reserve(1 << 20);
  once_buf.reserve(1 << 20);
  const auto whole = pread_to_end(fd, whole_buf);
  const auto once = pread_all(fd, once_buf);
  const auto read_whole = read_small_file("/proc/self/maps");
  ::close(fd);
  for (void* m : maps)
    ::munmap(m, static_cast<std::size_t>(page));
  REQUIRE(whole);
  REQUIRE(once);
  REQUIRE(read_whole);
  CHECK(whole->size() > 3 * static_cast<std::size_t>(page));
  CHECK(*whole == *read_whole);
  CHECK(once->size() < whole->size());  // why pread_all is not for such files
}
