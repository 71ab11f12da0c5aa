#pragma once

namespace kwd::platform {

// For a short-lived command that handles outputs of tens of MB (smoke): memory it frees is kept
// for its next allocations instead of going back to the system, so each large output does not
// fault in freshly zeroed pages again (a third of smoke's own time on a 25 MB notebook, in
// clear_page). The peak stays what it was; it is held until the command exits. Not for the
// daemon or a long `run`. A no-op where the allocator has no such setting.
void keep_freed_memory_for_reuse();

// For a long-lived watcher (`run`, the daemon), at its start: blocks of a MiB or more (the
// IOPub messages of a cell that floods its output, queued by libzmq) get a mapping of their
// own, unmapped when freed. By default glibc, after the first such block is freed, serves
// blocks up to 32 MiB from its heap and holds them (measured: a 100 MB flood left `run` 51
// MiB larger; with this, 3 to 9 MiB, and a peak of 40-44 MiB instead of 77). A no-op
// elsewhere.
void return_large_blocks_at_once();

// For a long-lived watcher (`run`, the daemon), after a cell: when this process's resident
// memory has grown 16 MiB or more since it last gave memory back (an IOPub flood: libzmq
// queued megabytes of stream messages, and the allocator keeps what they freed), the freed
// memory goes back to the system. One small read otherwise. A no-op where the allocator
// cannot.
void give_freed_memory_back_if_grown();

// For the daemon, once kernels' watches and reports are done with: every whole page the
// allocator holds free goes back to the system. What a kernel's watch takes (its sockets'
// buffers in libzmq the most, then its samples and its report) is freed at its end, but glibc
// gives back only the free top of its heap, and a small block still in use above the freed
// space keeps it resident. In the soak (heaptrack), the heap in use between kernels stayed
// near 0.1 MiB over 200 kernels, while the resident heap grew by 0.3-0.5 MiB. A no-op where
// the allocator cannot.
void give_freed_memory_back();

}  // namespace kwd::platform
