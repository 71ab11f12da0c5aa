#include "kwd/stacks/linux/native_unwind.hpp"

#include <dwarf.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <unordered_map>

#include "kwd/diagnosis/native_modules.hpp"
#include "kwd/stacks/pure.hpp"

namespace kwd::stacks::linux_stacks {
namespace {

using Clock = std::chrono::steady_clock;

// A module's function symbols sorted by address, read once and searched by halves: naming each
// frame with libdwfl's per-address lookup was the slow part in TensorFlow's libtensorflow_cc.so.2
// (about 1.2 million symbols; a CHECK abort's capture, 650 -> 312 ms, had run past its budget on
// a loaded machine).
struct SymbolIndex {
  struct Entry {
    Dwarf_Addr start = 0;
    GElf_Xword size = 0;
    const char* name = nullptr;  // libdw's, valid for the Dwfl's life
    int binding = 0;             // 2 global, 1 weak, 0 local: the name shown among aliases
  };
  // By start; at one address, global names first, then weak, then local, each in the table's
  // order (libdwfl's own preference: `__poll` before its weak alias `poll`).
  std::vector<Entry> entries;
  bool usable = false;  // false: the module's table could not be read (addrinfo then)
};

SymbolIndex index_symbols(const Libdw& lib, Dwfl_Module* module) {
  SymbolIndex index;
  const int count = lib.module_getsymtab(module);
  if (count <= 0) return index;
  index.entries.reserve(static_cast<std::size_t>(count));
  for (int i = 1; i < count; ++i) {
    GElf_Sym symbol{};
    GElf_Addr address = 0;
    const char* name =
        lib.module_getsym_info(module, i, &symbol, &address, nullptr, nullptr, nullptr);
    const int type = GELF_ST_TYPE(symbol.st_info);
    if (name == nullptr || *name == '\0' || symbol.st_shndx == SHN_UNDEF || address == 0 ||
        (type != STT_FUNC && type != STT_GNU_IFUNC))
      continue;
    const int bind = GELF_ST_BIND(symbol.st_info);
    index.entries.push_back({address, symbol.st_size, name,
                             bind == STB_GLOBAL ? 2
                             : bind == STB_WEAK ? 1
                                                : 0});
  }
  std::stable_sort(index.entries.begin(), index.entries.end(), [](const auto& a, const auto& b) {
    return a.start != b.start ? a.start < b.start : a.binding > b.binding;
  });
  index.usable = true;
  return index;
}

// The function whose [start, start + size) holds `at` (a sizeless one reaches to the next).
const SymbolIndex::Entry* find_symbol(const SymbolIndex& index, Dwarf_Addr at) {
  auto after = std::upper_bound(index.entries.begin(), index.entries.end(), at,
                                [](Dwarf_Addr a, const auto& e) { return a < e.start; });
  // Nested or overlapping symbols: the nearest start below that still covers `at`.
  for (auto it = after; it != index.entries.begin();) {
    --it;
    const bool covers = it->size > 0 ? at < it->start + it->size : it + 1 == after;
    if (covers) {
      // Aliases at one address: the first (the strongest binding) is the one shown.
      while (it != index.entries.begin() && (it - 1)->start == it->start)
        --it;
      return &*it;
    }
    if (after - it > 8) break;  // no enclosing symbol close by: none
  }
  return nullptr;
}

// What libdwfl's callbacks reach through their void* arguments. Nothing here may throw out
// of a callback: libdw is C.
struct Session {
  const Libdw* lib = nullptr;
  pid_t pid = 0;
  const std::vector<ThreadImage>* images = nullptr;
  std::size_t max_frames = 0;
  Clock::time_point deadline;
  std::size_t next = 0;  // next_thread's position
  // Frames named so far, by return address (and whether it is an activation): a pool's
  // threads share most of their frames, and naming one (symbol, demangling, line) costs far
  // more than unwinding to it (bench/stacks_bench.py's 101 threads: 340 ms to 45 ms).
  std::unordered_map<Dwarf_Addr, NativeFrame> named;
  std::unordered_map<Dwfl_Module*, SymbolIndex> symbols;  // built at a module's first frame
};

struct ThreadWalk {
  Session* session = nullptr;
  UnwoundThread* out = nullptr;
};

const ThreadImage* image_of(const Session& s, pid_t tid) {
  for (const auto& image : *s.images)
    if (image.tid == tid && image.problem.empty()) return &image;
  return nullptr;
}

pid_t next_thread(Dwfl*, void* arg, void** thread_arg) noexcept {
  auto& s = *static_cast<Session*>(arg);
  while (s.next < s.images->size()) {
    const ThreadImage& image = (*s.images)[s.next++];
    if (!image.problem.empty()) continue;
    *thread_arg = const_cast<ThreadImage*>(&image);
    return image.tid;
  }
  return 0;
}

bool get_thread(Dwfl*, pid_t tid, void* arg, void** thread_arg) noexcept {
  const ThreadImage* image = image_of(*static_cast<Session*>(arg), tid);
  if (image == nullptr) return false;
  *thread_arg = const_cast<ThreadImage*>(image);
  return true;
}

bool memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* arg) noexcept {
  const auto& s = *static_cast<Session*>(arg);
  for (const auto& image : *s.images) {
    if (addr >= image.stack_at &&
        addr - image.stack_at + sizeof(Dwarf_Word) <= image.stack.size()) {
      std::memcpy(result, image.stack.data() + (addr - image.stack_at), sizeof(Dwarf_Word));
      return true;
    }
  }
  // Outside every copied stack: the live process (it runs again; what unwinding reads
  // there, other than stacks, does not change).
  iovec local{result, sizeof(Dwarf_Word)};
  iovec remote{reinterpret_cast<void*>(addr), sizeof(Dwarf_Word)};
  return ::process_vm_readv(s.pid, &local, 1, &remote, 1, 0) ==
         static_cast<ssize_t>(sizeof(Dwarf_Word));
}

bool set_initial_registers(Dwfl_Thread* thread, void* thread_arg) noexcept {
  const auto& image = *static_cast<const ThreadImage*>(thread_arg);
  // The Session is not reachable from here; the functions are the one loaded Libdw's.
  const Libdw& lib = Libdw::get();
  if (!lib.thread_state_registers(thread, 0, static_cast<unsigned>(image.dwarf_registers.size()),
                                  image.dwarf_registers.data()))
    return false;
  lib.thread_state_register_pc(thread, image.pc);
  return true;
}

NativeFrame describe(Session& s, Dwfl* dwfl, Dwarf_Addr pc, bool activation) {
  const Libdw& lib = *s.lib;
  NativeFrame frame;
  frame.pc = pc;
  // A return address points after the call: the call itself is one byte before it.
  const Dwarf_Addr at = activation || pc == 0 ? pc : pc - 1;
  Dwfl_Module* module = lib.addrmodule(dwfl, at);
  if (module == nullptr) return frame;
  Dwarf_Addr start = 0;
  const char* name =
      lib.module_info(module, nullptr, &start, nullptr, nullptr, nullptr, nullptr, nullptr);
  if (name != nullptr) frame.module = name;
  frame.offset = pc - start;
  auto known = s.symbols.find(module);
  if (known == s.symbols.end()) known = s.symbols.emplace(module, index_symbols(lib, module)).first;
  if (known->second.usable) {
    if (const auto* symbol = find_symbol(known->second, at)) {
      frame.function = demangle(symbol->name);
      frame.offset = pc - symbol->start;
    }
  } else {
    GElf_Off offset = 0;
    GElf_Sym symbol{};
    const char* function =
        lib.module_addrinfo(module, at, &offset, &symbol, nullptr, nullptr, nullptr);
    if (function != nullptr) {
      frame.function = demangle(function);
      frame.offset = pc - (at - offset);
    }
  }
  if (Clock::now() < s.deadline && !diagnosis::is_runtime_module(frame.module)) {
    if (Dwfl_Line* line = lib.module_getsrc(module, at)) {
      int number = 0;
      if (const char* file = lib.lineinfo(line, nullptr, &number, nullptr, nullptr, nullptr)) {
        frame.file = file;
        frame.line = number;
      }
    }
  }
  return frame;
}

int on_frame(Dwfl_Frame* state, void* arg) noexcept {
  auto& walk = *static_cast<ThreadWalk*>(arg);
  Session& s = *walk.session;
  try {
    if (walk.out->frames.size() >= s.max_frames) {
      walk.out->truncated = true;
      return DWARF_CB_ABORT;
    }
    Dwarf_Addr pc = 0;
    bool activation = false;
    if (!s.lib->frame_pc(state, &pc, &activation)) return DWARF_CB_ABORT;
    // The address and, in the low bit, whether it is an activation (a user-space address
    // leaves the top bit free for the shift).
    const Dwarf_Addr key = (pc << 1U) | (activation ? 1U : 0U);
    auto named = s.named.find(key);
    if (named == s.named.end()) {
      Dwfl* dwfl = s.lib->thread_dwfl(s.lib->frame_thread(state));
      named = s.named.emplace(key, describe(s, dwfl, pc, activation)).first;
    }
    walk.out->frames.push_back(named->second);
    return DWARF_CB_OK;
  } catch (...) {
    walk.out->problem = "out of memory while naming frames";
    return DWARF_CB_ABORT;
  }
}

struct DwflDeleter {
  const Libdw* lib;
  void operator()(Dwfl* dwfl) const noexcept { lib->end(dwfl); }
};

}  // namespace

void unwind(const Libdw& lib, pid_t pid, const std::vector<ThreadImage>& images,
            std::size_t max_frames, Clock::time_point deadline,
            const std::function<void(const UnwoundThread&)>& done) {
  // Static: libdwfl keeps pointers to both for the Dwfl's life.
  static char* debuginfo_path = nullptr;
  static Dwfl_Callbacks callbacks{};
  callbacks.find_elf = lib.linux_proc_find_elf;
  // Separate debug info by build ID, on this machine only (/usr/lib/debug/.build-id, where
  // Debian's, Ubuntu's and Fedora's -dbg/-debuginfo packages put it). The standard lookup
  // would then ask the debuginfod servers in $DEBUGINFOD_URLS (set by default on Ubuntu and
  // Fedora) for every module without it, over the network, inside a capture's budget; and
  // loading libdebuginfod (libcurl, GnuTLS, Kerberos...) alone cost each capture ~10 ms.
  callbacks.find_debuginfo = lib.build_id_find_debuginfo;
  callbacks.debuginfo_path = &debuginfo_path;
  static Dwfl_Thread_Callbacks thread_callbacks{};
  thread_callbacks.next_thread = next_thread;
  thread_callbacks.get_thread = get_thread;
  thread_callbacks.memory_read = memory_read;
  thread_callbacks.set_initial_registers = set_initial_registers;

  const std::unique_ptr<Dwfl, DwflDeleter> dwfl(lib.begin(&callbacks), DwflDeleter{&lib});
  if (!dwfl) throw std::runtime_error(std::string("dwfl_begin: ") + lib.errmsg(-1));
  lib.report_begin(dwfl.get());
  if (const int err = lib.linux_proc_report(dwfl.get(), pid); err != 0)
    throw std::runtime_error("cannot read /proc/" + std::to_string(pid) +
                             "/maps: " + std::strerror(err > 0 ? err : EINVAL));
  if (lib.report_end(dwfl.get(), nullptr, nullptr) != 0)
    throw std::runtime_error(std::string("dwfl_report_end: ") + lib.errmsg(-1));

  Session session{&lib, pid, &images, max_frames, deadline, 0, {}, {}};
  if (!lib.attach_state(dwfl.get(), nullptr, pid, &thread_callbacks, &session))
    throw std::runtime_error(std::string("dwfl_attach_state: ") + lib.errmsg(-1));

  for (const auto& image : images) {
    UnwoundThread thread;
    thread.tid = image.tid;
    thread.problem = image.problem;
    if (image.problem.empty()) {
      ThreadWalk walk{&session, &thread};
      // The end of a stack is reported as an error by some architectures: frames found count.
      if (lib.getthread_frames(dwfl.get(), image.tid, on_frame, &walk) < 0 &&
          thread.frames.empty() && thread.problem.empty())
        thread.problem = std::string("unwinding failed: ") + lib.errmsg(-1);
    }
    done(thread);
  }
}

}  // namespace kwd::stacks::linux_stacks
