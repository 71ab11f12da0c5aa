#pragma once

#include <initializer_list>
#include <vector>

#include "kwd/util/unique_fd.hpp"

namespace kwd::loop {

// The self-pipe trick: the listed signals are caught by a handler that only writes the
// signal number into a non-blocking pipe, so the event loop sees signals as a readable fd.
// Portable (no signalfd), and nothing but write(2) ever runs in signal context.
// One instance per process; the destructor restores the previous dispositions.
class SignalPipe {
 public:
  explicit SignalPipe(std::initializer_list<int> signals);
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  [[nodiscard]] int fd() const { return read_end_.get(); }
  // Signals received since the last call, in arrival order.
  std::vector<int> drain();

 private:
  util::UniqueFd read_end_;
  util::UniqueFd write_end_;
  std::vector<int> signals_;
};

}  // namespace kwd::loop
