#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "kwd/protocol/wire_limits.hpp"

namespace kwd::protocol {
class DropCounts;
}

namespace kwd::protocol {

struct HeartbeatOptions {
  std::chrono::milliseconds interval{1000};
  // Longer than `interval`: how often a kernel at rest (idle, its memory flat, answering) is
  // pinged; the daemon's, whose hundreds of idle kernels would wake it hundreds of times a
  // second. A miss brings `interval` back at once. 0: always `interval`.
  std::chrono::milliseconds idle_interval{0};
  std::chrono::milliseconds timeout{1000};
  int misses_to_hang = 5;  // consecutive; 0: never call it a hang
  // False for a kernel that answers its heartbeat from the loop that runs its cells (IRkernel:
  // R has one thread): silence while IOPub says busy is then its normal, and only misses while
  // it is not busy count towards a hang (a stopped or wedged process).
  bool answered_while_busy = true;
  std::size_t history = 120;
};

// What `kernel-watchdog run` lets a user tune about listening to the kernel.
struct ListenerOptions {
  HeartbeatOptions heartbeat;
  std::size_t last_cells = 10;
  WireLimits limits;
  // How long a missing connection file, or one whose ports are still 0, is waited for (the
  // kernel writes it itself when it was started without one).
  std::chrono::milliseconds connection_file_wait{60'000};
  // How the connection file is read: its text, or nullopt while it does not exist; throws
  // ConnectionFileError for one that exists and cannot be read. Unset: from this process's
  // file system. The daemon on a node reads a containerised kernel's file through the
  // kernel's own root (platform::RootView::read_file).
  std::function<std::optional<std::string>(const std::string& path)> read_connection_file;
  // Set when a client of the kernel's own (smoke's) receives IOPub already: the listener then
  // subscribes to nothing itself, so that each message is received, checked and parsed once,
  // not twice. The client hands every IOPub message to KernelListener::on_iopub_message, and
  // this reads its socket for the kernel's last messages when the kernel has died (as drain()).
  std::function<void(std::chrono::milliseconds quiet, std::chrono::milliseconds budget)>
      client_iopub_drain;
  // With client_iopub_drain: the messages that client did not believe, for the report.
  std::function<const DropCounts*()> client_iopub_dropped;
  // Whether the kernel is at rest (idle and its memory flat), for heartbeat.idle_interval; set
  // by the Watch, which knows both.
  std::function<bool()> kernel_at_rest;
};

}  // namespace kwd::protocol
