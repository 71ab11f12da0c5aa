// Where every thread of a process is, on macOS: the task's threads stopped together
// (task_suspend), each one's registers (thread_get_state) and its frame-pointer chain read from
// the task's memory (vm_read_overwrite), the task resumed, then each return address named from
// the images dyld lists in the task (TASK_DYLD_INFO) and their symbol tables read from the
// task's own memory, so that libraries that live only in the shared cache are named too.
// Apple's ABIs keep the frame pointer on arm64 and x86_64 alike: the chain is the stack.
// Compiled on Linux (scripts/macos_compile.sh) and run only on a Mac.
#include <libproc.h>
#include <mach-o/dyld_images.h>
#include <mach-o/loader.h>
#include <mach-o/nlist.h>
#include <mach/mach.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "kwd/hang/thread_snapshot.hpp"
#include "kwd/stacks/crash.hpp"
#include "kwd/stacks/pure.hpp"
#include "kwd/stacks/stacks.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::stacks {
namespace {

using Clock = std::chrono::steady_clock;

// A send right to a task or thread, released at scope end.
class MachPort {
 public:
  explicit MachPort(mach_port_t port = MACH_PORT_NULL) : port_(port) {}
  MachPort(const MachPort&) = delete;
  MachPort& operator=(const MachPort&) = delete;
  MachPort(MachPort&& other) noexcept : port_(other.port_) { other.port_ = MACH_PORT_NULL; }
  ~MachPort() {
    if (port_ != MACH_PORT_NULL) ::mach_port_deallocate(::mach_task_self(), port_);
  }
  [[nodiscard]] mach_port_t get() const { return port_; }

 private:
  mach_port_t port_;
};

// The task stopped while its stacks are copied; resumed however the copy ends.
class Suspended {
 public:
  explicit Suspended(mach_port_t task) : task_(task), ok_(::task_suspend(task) == KERN_SUCCESS) {}
  Suspended(const Suspended&) = delete;
  Suspended& operator=(const Suspended&) = delete;
  ~Suspended() {
    if (ok_) ::task_resume(task_);
  }
  [[nodiscard]] bool ok() const { return ok_; }

 private:
  mach_port_t task_;
  bool ok_;
};

template <typename T>
bool read_remote(mach_port_t task, std::uint64_t address, T& out) {
  vm_size_t got = 0;
  return ::vm_read_overwrite(task, static_cast<vm_address_t>(address), sizeof(T),
                             reinterpret_cast<vm_address_t>(&out), &got) == KERN_SUCCESS &&
         got == sizeof(T);
}

bool read_remote_bytes(mach_port_t task, std::uint64_t address, void* out, std::size_t size) {
  vm_size_t got = 0;
  return ::vm_read_overwrite(task, static_cast<vm_address_t>(address), size,
                             reinterpret_cast<vm_address_t>(out), &got) == KERN_SUCCESS &&
         got == size;
}

// A NUL-terminated string in the task, at most `cap` bytes; "" when unreadable. Read in small
// pieces: a string near the end of a mapping must not fail for the bytes past it.
std::string read_remote_string(mach_port_t task, std::uint64_t address, std::size_t cap = 1024) {
  std::string out;
  char piece[128];
  while (out.size() < cap) {
    if (!read_remote_bytes(task, address + out.size(), piece, sizeof piece)) break;
    const auto* end = static_cast<const char*>(std::memchr(piece, '\0', sizeof piece));
    out.append(piece, end ? static_cast<std::size_t>(end - piece) : sizeof piece);
    if (end) return out;
  }
  return out.size() >= cap ? out.substr(0, cap) : out;
}

// Pointer authentication (arm64e system code) signs return addresses in their top bits.
std::uint64_t strip_pointer_auth(std::uint64_t address) {
#if defined(__arm64__) || defined(__aarch64__)
  return address & ((std::uint64_t{1} << 47) - 1);
#else
  return address;
#endif
}

struct Registers {
  std::uint64_t pc = 0;
  std::uint64_t frame = 0;
  std::uint64_t link = 0;  // arm64's return address register; 0 on x86_64
};

std::optional<Registers> registers_of(mach_port_t thread) {
#if defined(__arm64__) || defined(__aarch64__)
  arm_thread_state64_t state{};
  mach_msg_type_number_t count = ARM_THREAD_STATE64_COUNT;
  if (::thread_get_state(thread, ARM_THREAD_STATE64, reinterpret_cast<thread_state_t>(&state),
                         &count) != KERN_SUCCESS)
    return std::nullopt;
  return Registers{strip_pointer_auth(arm_thread_state64_get_pc(state)),
                   arm_thread_state64_get_fp(state),
                   strip_pointer_auth(arm_thread_state64_get_lr(state))};
#else
  x86_thread_state64_t state{};
  mach_msg_type_number_t count = x86_THREAD_STATE64_COUNT;
  if (::thread_get_state(thread, x86_THREAD_STATE64, reinterpret_cast<thread_state_t>(&state),
                         &count) != KERN_SUCCESS)
    return std::nullopt;
  return Registers{state.__rip, state.__rbp, 0};
#endif
}

// The program counter, then each saved return address up the frame-pointer chain: a frame
// record is {the caller's frame pointer, the return address}, and callers' records lie at
// higher addresses. Stops at the chain's end, a record out of order, or a read that fails.
// A leaf function (a system call's stub, where most waiting threads are) saves no record: on
// arm64 its caller is in the link register, taken when the first record does not already
// hold it. (On x86_64 that caller is at the stack pointer, not read: one frame may be missing.)
std::vector<std::uint64_t> walk_frames(mach_port_t task, const Registers& regs,
                                       std::size_t max_frames, bool& truncated) {
  std::vector<std::uint64_t> pcs{regs.pc};
  std::uint64_t frame = regs.frame;
  if (regs.link != 0) {
    std::uint64_t record[2] = {0, 0};
    const bool read = frame != 0 && read_remote_bytes(task, frame, record, sizeof record);
    if (!read || strip_pointer_auth(record[1]) != regs.link) pcs.push_back(regs.link);
  }
  while (frame != 0 && frame % sizeof(std::uint64_t) == 0) {
    if (pcs.size() >= max_frames) {
      truncated = true;
      break;
    }
    std::uint64_t record[2] = {0, 0};
    if (!read_remote_bytes(task, frame, record, sizeof record)) break;
    const std::uint64_t return_address = strip_pointer_auth(record[1]);
    if (return_address == 0) break;
    pcs.push_back(return_address);
    if (record[0] <= frame) break;
    frame = record[0];
  }
  return pcs;
}

// One image dyld loaded in the task, with what naming its addresses takes.
struct LoadedImage {
  std::uint64_t start = 0;  // its mach header, where __TEXT begins
  std::uint64_t end = 0;
  std::uint64_t slide = 0;
  std::string path;
  std::uint64_t linkedit_base = 0;  // where file offsets into __LINKEDIT are mapped
  std::uint32_t symbol_offset = 0, symbol_count = 0, strings_offset = 0, strings_size = 0;
  bool has_symbols = false;
};

// Reads an image's load commands from the task: its __TEXT range, slide and symbol table.
bool read_image(mach_port_t task, std::uint64_t header_address, std::string path,
                LoadedImage& out) {
  mach_header_64 header{};
  if (!read_remote(task, header_address, header) || header.magic != MH_MAGIC_64) return false;
  constexpr std::uint32_t kMaxCommandBytes = 1 << 20;
  if (header.sizeofcmds > kMaxCommandBytes) return false;
  std::vector<unsigned char> commands(header.sizeofcmds);
  if (!read_remote_bytes(task, header_address + sizeof header, commands.data(), commands.size()))
    return false;
  out.path = std::move(path);
  out.start = header_address;
  std::uint64_t text_vmaddr = 0, text_size = 0, linkedit_vmaddr = 0, linkedit_fileoff = 0;
  bool have_text = false, have_linkedit = false;
  std::size_t at = 0;
  for (std::uint32_t i = 0; i < header.ncmds && at + sizeof(load_command) <= commands.size(); ++i) {
    load_command command{};
    std::memcpy(&command, commands.data() + at, sizeof command);
    if (command.cmdsize < sizeof command || at + command.cmdsize > commands.size()) break;
    if (command.cmd == LC_SEGMENT_64 && command.cmdsize >= sizeof(segment_command_64)) {
      segment_command_64 segment{};
      std::memcpy(&segment, commands.data() + at, sizeof segment);
      if (std::strncmp(segment.segname, SEG_TEXT, sizeof segment.segname) == 0) {
        text_vmaddr = segment.vmaddr;
        text_size = segment.vmsize;
        have_text = true;
      } else if (std::strncmp(segment.segname, SEG_LINKEDIT, sizeof segment.segname) == 0) {
        linkedit_vmaddr = segment.vmaddr;
        linkedit_fileoff = segment.fileoff;
        have_linkedit = true;
      }
    } else if (command.cmd == LC_SYMTAB && command.cmdsize >= sizeof(symtab_command)) {
      symtab_command symtab{};
      std::memcpy(&symtab, commands.data() + at, sizeof symtab);
      out.symbol_offset = symtab.symoff;
      out.symbol_count = symtab.nsyms;
      out.strings_offset = symtab.stroff;
      out.strings_size = symtab.strsize;
      out.has_symbols = true;
    }
    at += command.cmdsize;
  }
  if (!have_text) return false;
  out.slide = header_address - text_vmaddr;
  out.end = header_address + text_size;
  out.has_symbols = out.has_symbols && have_linkedit;
  if (out.has_symbols) out.linkedit_base = linkedit_vmaddr + out.slide - linkedit_fileoff;
  return true;
}

// Every image dyld lists in the task (and dyld itself), sorted by address.
std::vector<LoadedImage> images_of(mach_port_t task) {
  std::vector<LoadedImage> out;
  task_dyld_info_data_t info{};
  mach_msg_type_number_t count = TASK_DYLD_INFO_COUNT;
  if (::task_info(task, TASK_DYLD_INFO, reinterpret_cast<task_info_t>(&info), &count) !=
      KERN_SUCCESS)
    return out;
  dyld_all_image_infos all{};
  // dyld sets infoArray to null while it changes the list (a library loading): read again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (!read_remote(task, info.all_image_info_addr, all)) return out;
    if (all.infoArray != nullptr) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  constexpr std::uint32_t kMaxImages = 8192;
  const std::uint32_t n = std::min(all.infoArrayCount, kMaxImages);
  std::vector<dyld_image_info> entries(n);
  if (n > 0 && !read_remote_bytes(task, reinterpret_cast<std::uint64_t>(all.infoArray),
                                  entries.data(), n * sizeof(dyld_image_info)))
    return out;
  for (const auto& entry : entries) {
    LoadedImage image;
    const auto header = reinterpret_cast<std::uint64_t>(entry.imageLoadAddress);
    if (read_image(task, header,
                   read_remote_string(task, reinterpret_cast<std::uint64_t>(entry.imageFilePath)),
                   image))
      out.push_back(std::move(image));
  }
  LoadedImage loader;
  if (all.version >= 2 &&
      read_image(task, reinterpret_cast<std::uint64_t>(all.dyldImageLoadAddress), "/usr/lib/dyld",
                 loader))
    out.push_back(std::move(loader));
  std::sort(out.begin(), out.end(),
            [](const LoadedImage& a, const LoadedImage& b) { return a.start < b.start; });
  return out;
}

// An image's defined symbols (address, string index), sorted, read once per capture.
struct SymbolTable {
  std::vector<std::pair<std::uint64_t, std::uint32_t>> symbols;
};

SymbolTable read_symbols(mach_port_t task, const LoadedImage& image) {
  SymbolTable out;
  // Beyond this a table is not read whole for a stacks request (frames keep their offsets).
  constexpr std::uint32_t kMaxSymbols = 4'000'000;
  if (!image.has_symbols || image.symbol_count == 0 || image.symbol_count > kMaxSymbols) return out;
  std::vector<nlist_64> entries(image.symbol_count);
  if (!read_remote_bytes(task, image.linkedit_base + image.symbol_offset, entries.data(),
                         entries.size() * sizeof(nlist_64)))
    return out;
  for (const auto& entry : entries) {
    if ((entry.n_type & N_STAB) != 0 || (entry.n_type & N_TYPE) != N_SECT ||
        entry.n_un.n_strx >= image.strings_size)
      continue;
    out.symbols.emplace_back(entry.n_value + image.slide, entry.n_un.n_strx);
  }
  std::sort(out.symbols.begin(), out.symbols.end());
  return out;
}

// Names return addresses for one capture; each image's symbols are read when first needed.
class Namer {
 public:
  Namer(mach_port_t task, std::vector<LoadedImage> images)
      : task_(task), images_(std::move(images)) {}

  // `pc` of frame `depth`: a return address (depth > 0) is named by the call before it.
  NativeFrame name(std::uint64_t pc, std::size_t depth) {
    NativeFrame frame;
    frame.pc = pc;
    const std::uint64_t lookup = depth > 0 && pc > 0 ? pc - 1 : pc;
    const auto it =
        std::upper_bound(images_.begin(), images_.end(), lookup,
                         [](std::uint64_t a, const LoadedImage& i) { return a < i.start; });
    if (it == images_.begin()) return frame;
    const LoadedImage& image = *std::prev(it);
    if (lookup >= image.end) return frame;
    frame.module = image.path;
    frame.offset = pc - image.start;
    auto& table = tables_[image.start];
    if (!table) table = read_symbols(task_, image);
    const auto& symbols = table->symbols;
    const auto at = std::upper_bound(symbols.begin(), symbols.end(),
                                     std::make_pair(lookup, std::uint32_t{0xffffffff}));
    if (at == symbols.begin()) return frame;
    const auto& [address, string_index] = *std::prev(at);
    if (address < image.start) return frame;
    std::string symbol =
        read_remote_string(task_, image.linkedit_base + image.strings_offset + string_index, 4096);
    // A stripped image's only symbol before its code is its header's: it names nothing.
    if (symbol.starts_with("__mh_") && symbol.ends_with("_header")) return frame;
    // Mach-O's C names carry a leading underscore ("_main", "__ZN3foo3barEv").
    if (symbol.starts_with("_")) symbol.erase(0, 1);
    frame.function = demangle(symbol);
    frame.offset = pc - address;
    return frame;
  }

 private:
  mach_port_t task_;
  std::vector<LoadedImage> images_;
  std::map<std::uint64_t, std::optional<SymbolTable>> tables_;
};

std::string run_state(int state) {
  switch (state) {
    case TH_STATE_RUNNING:
      return hang::describe_state('R');
    case TH_STATE_STOPPED:
      return hang::describe_state('T');
    case TH_STATE_WAITING:
      return hang::describe_state('S');
    case TH_STATE_UNINTERRUPTIBLE:
      return hang::describe_state('D');
    default:
      return "halted";
  }
}

std::string command_of(pid_t pid) {
  char path[PROC_PIDPATHINFO_MAXSIZE] = {};
  if (::proc_pidpath(pid, path, sizeof path) <= 0) return {};
  return redact_command(path);
}

std::string kern_problem(const char* what, pid_t pid, kern_return_t code) {
  return std::string(what) + " refused for pid " + std::to_string(pid) + " (" +
         ::mach_error_string(code) + ")";
}

void add_native(ProcessStacks& out, const CaptureOptions& options) {
  mach_port_t raw_task = MACH_PORT_NULL;
  if (const kern_return_t code = ::task_for_pid(::mach_task_self(), out.pid, &raw_task);
      code != KERN_SUCCESS) {
    out.native_missing =
        kern_problem("task_for_pid", out.pid, code) +
        ": macOS lets only root (or a signed debugger) read another process's threads; run "
        "`sudo kernel-watchdog stacks`, as py-spy needs sudo on macOS";
    return;
  }
  const MachPort task(raw_task);
  thread_act_array_t list = nullptr;
  mach_msg_type_number_t listed = 0;
  if (const kern_return_t code = ::task_threads(task.get(), &list, &listed); code != KERN_SUCCESS) {
    out.native_missing = kern_problem("task_threads", out.pid, code);
    return;
  }
  std::vector<MachPort> threads;
  for (mach_msg_type_number_t i = 0; i < listed; ++i)
    threads.emplace_back(list[i]);
  ::vm_deallocate(::mach_task_self(), reinterpret_cast<vm_address_t>(list),
                  listed * sizeof(thread_act_t));
  out.threads_total = threads.size();
  if (threads.size() > options.max_threads) threads.resize(options.max_threads);

  // Names and states first: a stopped task's threads would all read as stopped.
  for (std::size_t i = 0; i < threads.size(); ++i) {
    ThreadStacks t;
    thread_identifier_info_data_t id{};
    mach_msg_type_number_t count = THREAD_IDENTIFIER_INFO_COUNT;
    if (::thread_info(threads[i].get(), THREAD_IDENTIFIER_INFO,
                      reinterpret_cast<thread_info_t>(&id), &count) == KERN_SUCCESS) {
      t.tid = static_cast<pid_t>(id.thread_id);
      // The thread's TSD base, which pthread_self() is near: kept for joining Python's dump.
      t.thread_pointer = id.thread_handle;
    }
    // task_threads lists the main thread first; it takes the pid as its number, as on Linux.
    if (i == 0) t.tid = out.pid;
    thread_extended_info_data_t extended{};
    count = THREAD_EXTENDED_INFO_COUNT;
    if (::thread_info(threads[i].get(), THREAD_EXTENDED_INFO,
                      reinterpret_cast<thread_info_t>(&extended), &count) == KERN_SUCCESS) {
      t.name = std::string(extended.pth_name, strnlen(extended.pth_name, sizeof extended.pth_name));
      t.state = run_state(extended.pth_run_state);
    }
    out.threads.push_back(std::move(t));
  }
  if (!out.threads.empty()) out.process_state = out.threads.front().state;

  std::vector<std::vector<std::uint64_t>> pcs(threads.size());
  {
    const auto frozen_at = Clock::now();
    const Suspended stopped(task.get());
    if (!stopped.ok()) {
      out.native_missing = "task_suspend refused for pid " + std::to_string(out.pid);
      return;
    }
    for (std::size_t i = 0; i < threads.size(); ++i) {
      const auto regs = registers_of(threads[i].get());
      if (!regs) {
        out.threads[i].native_problem = "thread_get_state refused";
        continue;
      }
      pcs[i] = walk_frames(task.get(), *regs, options.max_frames, out.threads[i].native_truncated);
    }
    out.frozen_us =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - frozen_at).count();
  }
  // Named after the task runs again: its images do not move, and it waits no longer for us.
  const auto deadline = Clock::now() + options.native_budget;
  Namer namer(task.get(), images_of(task.get()));
  for (std::size_t i = 0; i < threads.size(); ++i) {
    for (std::size_t depth = 0; depth < pcs[i].size(); ++depth) {
      if (Clock::now() > deadline) {
        out.threads[i].native_problem = "the capture's time ran out while naming frames";
        break;
      }
      out.threads[i].native.push_back(namer.name(pcs[i][depth], depth));
    }
  }
  std::sort(out.threads.begin(), out.threads.end(),
            [](const ThreadStacks& a, const ThreadStacks& b) { return a.tid < b.tid; });
}

// The process's descendants, breadth first; at most `cap`, `total` counting all found.
std::vector<pid_t> descendants(pid_t pid, std::size_t cap, std::size_t& total) {
  constexpr std::size_t kMaxScanned = 256;
  std::vector<pid_t> queue{pid};
  std::vector<pid_t> found;
  total = 0;
  for (std::size_t next = 0; next < queue.size() && queue.size() < kMaxScanned; ++next) {
    pid_t children[256];
    // It returns how many pids it wrote (not bytes).
    const int listed = ::proc_listchildpids(queue[next], children, sizeof children);
    const int n = listed > 0 ? std::min<int>(listed, 256) : 0;
    for (int i = 0; i < n; ++i) {
      if (children[i] <= 0 || std::find(queue.begin(), queue.end(), children[i]) != queue.end())
        continue;
      queue.push_back(children[i]);
      ++total;
      if (found.size() < cap) found.push_back(children[i]);
    }
  }
  return found;
}

}  // namespace

ProcessStacks capture_stacks(pid_t pid, const CaptureOptions& options) {
  const auto started = Clock::now();
  ProcessStacks out;
  out.pid = pid;
  out.taken_at_ms = util::wall_ms();
  out.found = hang::process_alive(pid);
  if (!out.found) return out;
  out.command = command_of(pid);
  // Suspending our own task would stop this thread too, with nothing to resume it.
  if (options.native && pid == ::getpid())
    out.native_missing = "the watchdog's own process: not stopped to read its own threads";
  else if (options.native)
    add_native(out, options);
  if (options.python)
    out.python_missing =
        "not read on macOS yet: the start-up hook's all-threads dump goes to a memory file "
        "only Linux lets another process open";
  if (options.max_children > 0) {
    CaptureOptions child_options = options;
    child_options.max_children = 0;
    for (const pid_t child : descendants(pid, options.max_children, out.children_total))
      out.children.push_back(capture_stacks(child, child_options));
  }
  out.capture_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  return out;
}

// No crash handler is loaded on macOS: a crash is read from ReportCrash's report after the
// death (read_system_crash_report), so nothing asks for this.
CrashStack capture_crash_stack(const FatalSignal& fault, std::chrono::milliseconds) {
  CrashStack out;
  out.fault = fault;
  out.missing = "macOS: the crash is read from the report ReportCrash writes, not in a handler";
  return out;
}

}  // namespace kwd::stacks
