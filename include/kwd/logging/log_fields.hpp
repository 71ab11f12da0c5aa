#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace kwd::logging {

// Structured fields for the log records written on this thread while it lives: a JSON log
// line and a journald record carry them as fields of their own (KERNEL_ID=, CAUSE=,
// REPORT=), so `journalctl KERNEL_ID=…` finds a kernel's lines. The text log leaves them
// out; its message says the same in words. Nested scopes add to the outer ones.
class LogFields {
 public:
  using Field = std::pair<std::string, std::string>;  // name in snake_case, value
  explicit LogFields(std::vector<Field> fields);
  // LogFields({{"kernel_id", id}}): a list, never read as a pair of iterators.
  LogFields(std::initializer_list<Field> fields) : LogFields(std::vector<Field>(fields)) {}
  ~LogFields();
  LogFields(const LogFields&) = delete;
  LogFields& operator=(const LogFields&) = delete;

  // The fields of every scope open on this thread, one per name (an inner scope's value
  // wins), in the order the names were first given.
  static std::vector<Field> current();

 private:
  std::size_t added_;
};

}  // namespace kwd::logging
