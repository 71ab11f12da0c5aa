#include "kwd/probes/nvml/nvml_worker.hpp"

#include <algorithm>
#include <exception>
#include <utility>

#include "kwd/platform/thread_name.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::probes::nvml {
namespace {

// Frees an NVML event set before the library that made it is shut down.
class EventSetOwner {
 public:
  EventSetOwner(const NvmlLibrary& lib, EventSet set) : lib_(lib), set_(set) {}
  ~EventSetOwner() { lib_.free_event_set(set_); }
  EventSetOwner(const EventSetOwner&) = delete;
  EventSetOwner& operator=(const EventSetOwner&) = delete;
  [[nodiscard]] EventSet get() const { return set_; }

 private:
  const NvmlLibrary& lib_;
  EventSet set_;
};

}  // namespace

NvmlWorker::NvmlWorker(std::filesystem::path library, std::chrono::milliseconds interval)
    : library_(std::move(library)),
      interval_(std::max(interval, std::chrono::milliseconds(10))),
      thread_([this] { run(); }) {}

NvmlWorker::~NvmlWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool NvmlWorker::stopping() {
  std::lock_guard lock(mutex_);
  return stopping_;
}

bool NvmlWorker::copy_if_newer(std::uint64_t& generation, GpuState& into) {
  std::lock_guard lock(mutex_);
  if (generation_ == generation) return false;
  into = published_;
  generation = generation_;
  return true;
}

std::uint64_t NvmlWorker::follow_xid_events(std::uint64_t& cursor, std::vector<XidEvent>& into) {
  std::lock_guard lock(mutex_);
  const std::uint64_t first = xid_end_ - xid_recent_.size();
  std::uint64_t missed = 0;
  if (cursor < first) {
    missed = first - cursor;
    cursor = first;
  }
  into.insert(into.end(), xid_recent_.begin() + static_cast<std::ptrdiff_t>(cursor - first),
              xid_recent_.end());
  cursor = xid_end_;
  return missed;
}

std::uint64_t NvmlWorker::xid_events_end() {
  std::lock_guard lock(mutex_);
  return xid_end_;
}

std::uint64_t NvmlWorker::served() {
  std::lock_guard lock(mutex_);
  return served_;
}

bool NvmlWorker::sample_and_wait(std::chrono::microseconds wait, std::uint64_t* number) {
  std::unique_lock lock(mutex_);
  if (!started_ || published_.phase != GpuState::Phase::running) return false;
  const std::uint64_t request = ++requests_;
  if (number != nullptr) *number = request;
  wake_.notify_all();
  return wake_.wait_for(lock, wait, [&] { return served_ >= request; });
}

bool NvmlWorker::unavailable() {
  std::lock_guard lock(mutex_);
  return published_.phase == GpuState::Phase::unavailable;
}

bool NvmlWorker::wait_started(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return wake_.wait_for(lock, timeout, [this] { return started_; });
}

void NvmlWorker::publish(const GpuState& state, std::optional<std::uint64_t> served) {
  {
    std::lock_guard lock(mutex_);
    published_ = state;
    ++generation_;
    if (served) served_ = std::max(served_, *served);
    if (state.phase != GpuState::Phase::starting) started_ = true;
  }
  wake_.notify_all();
}

void NvmlWorker::note_problem(GpuState& state, std::string problem) {
  if (state.problems.size() >= 32) return;
  if (std::find(state.problems.begin(), state.problems.end(), problem) == state.problems.end())
    state.problems.push_back(std::move(problem));
}

void NvmlWorker::sample_devices(const NvmlLibrary& lib, std::vector<Device>& handles,
                                GpuState& state, ProcessBuffer& buffer) {
  // When the calls began: a reading counts as a cell's end only if it was begun after that
  // end (one begun just before the end was asked for is not it).
  const std::int64_t began_ms = util::wall_ms();
  bool whole = true;
  for (std::size_t i = 0; i < handles.size(); ++i) {
    GpuDeviceState& dev = state.devices[i];
    const auto prefix = "device " + std::to_string(dev.index) + ": ";
    const auto memory = lib.memory(handles[i]);
    if (memory.ok()) {
      dev.memory = memory.value;
    } else {
      dev.memory.reset();
      note_problem(state, prefix + "memory info: " + lib.error_string(memory.code));
      whole = false;
    }
    const Return rc = lib.compute_processes(handles[i], buffer, dev.processes);
    dev.processes_known = rc == kSuccess;
    if (rc != kSuccess) {
      note_problem(state, prefix + "running processes: " + lib.error_string(rc));
      whole = false;
    }
  }
  if (whole)
    state.sampled_whole = true;
  else if (state.sampled_whole && state.failing_since_ms == 0)
    state.failing_since_ms = began_ms;
  state.sampled_at_ms = began_ms;
}

void NvmlWorker::take_xid_events(const NvmlLibrary& lib, EventSet events,
                                 const std::vector<Device>& handles, GpuState& state,
                                 ProcessBuffer& buffer, std::vector<GpuProcess>& on_device) {
  for (;;) {
    EventData data{};
    const Return rc = lib.wait_event(events, data, 0);
    if (rc == kErrorTimeout) break;
    if (rc != kSuccess) {
      note_problem(state, "nvmlEventSetWait: " + lib.error_string(rc));
      break;
    }
    if ((data.eventType & kEventTypeXidCriticalError) == 0) continue;
    XidEvent xid;
    xid.t_ms = util::wall_ms();
    xid.served_before = served_;  // written by this thread only (under the lock)
    xid.xid = data.eventData;
    const auto at = std::find(handles.begin(), handles.end(), data.device);
    xid.device = at == handles.end()
                     ? 0u
                     : state.devices[static_cast<std::size_t>(at - handles.begin())].index;
    // Who was on the device when it faulted: NVML's event does not say.
    if (at != handles.end() && lib.compute_processes(*at, buffer, on_device) == kSuccess)
      for (const auto& p : on_device)
        xid.pids_on_device.push_back(p.pid);
    std::lock_guard lock(mutex_);
    if (xid_recent_.size() == kXidKept) xid_recent_.pop_front();
    xid_recent_.push_back(std::move(xid));
    ++xid_end_;
  }
}

void NvmlWorker::run() {
  // Named, so `top -H` and the tests can tell it from ZeroMQ's threads.
  platform::name_this_thread("kwd-nvml");
  GpuState state;
  try {
    std::string problem;
    const auto lib = NvmlLibrary::load(library_, problem);
    if (!lib) {
      state.phase = GpuState::Phase::unavailable;
      state.reason = problem;
      publish(state);
      return;
    }
    if (const auto version = lib->driver_version(); version.ok())
      state.driver_version = version.value;
    const auto count = lib->device_count();
    if (!count.ok() || count.value == 0) {
      state.phase = GpuState::Phase::unavailable;
      state.reason = count.ok()
                         ? "no NVIDIA GPU: NVML " + state.driver_version + " found no device"
                         : "no NVIDIA GPU: nvmlDeviceGetCount: " + lib->error_string(count.code);
      publish(state);
      return;
    }
    std::vector<Device> handles;
    for (unsigned int i = 0; i < count.value; ++i) {
      const auto device = lib->device(i);
      if (!device.ok()) {
        // A device NVML cannot open (no permission, GPU lost) is left out; the others count.
        note_problem(state, "device " + std::to_string(i) + ": " + lib->error_string(device.code));
        continue;
      }
      GpuDeviceState dev;
      dev.index = i;
      if (const auto name = lib->name(device.value); name.ok()) dev.name = name.value;
      if (const auto uuid = lib->uuid(device.value); uuid.ok()) dev.uuid = uuid.value;
      handles.push_back(device.value);
      state.devices.push_back(std::move(dev));
    }

    // Xid events: one set for every device that supports them.
    std::optional<EventSetOwner> events;
    std::string xid_note = "Xid events: ";
    if (const auto set = lib->create_event_set(); set.ok()) {
      events.emplace(*lib, set.value);
      int registered = 0;
      for (std::size_t i = 0; i < handles.size(); ++i) {
        const Return rc = lib->register_xid_events(handles[i], set.value);
        if (rc == kSuccess)
          ++registered;
        else
          note_problem(state, "device " + std::to_string(state.devices[i].index) +
                                  ": Xid events: " + lib->error_string(rc));
      }
      if (registered == 0) events.reset();
      xid_note += registered == 0 ? "none registered"
                                  : "waited for on " + std::to_string(registered) + " device(s)";
    } else {
      xid_note += "unavailable (" + lib->error_string(set.code) + ")";
    }

    ProcessBuffer buffer;
    sample_devices(*lib, handles, state, buffer);
    state.phase = GpuState::Phase::running;
    const auto describe = [&] {
      return "NVML " + (state.driver_version.empty() ? std::string("?") : state.driver_version) +
             " via " + lib->path() + ": " + std::to_string(handles.size()) + " device(s) every " +
             std::to_string(interval_.count()) + " ms; memory info " + lib->memory_api() +
             ", running processes " + lib->processes_api() + "; " + xid_note;
    };
    state.reason = describe();
    publish(state);

    ProcessBuffer event_buffer;
    std::vector<GpuProcess> on_device;
    auto next_sample = util::steady_ms() + interval_.count();
    while (!stopping()) {
      const auto now = util::steady_ms();
      const bool due = now >= next_sample;
      std::uint64_t serving = 0;  // the requests made before this sample begins
      bool asked = false;
      {
        std::lock_guard lock(mutex_);
        serving = requests_;
        asked = requests_ != served_;
      }
      if (due || asked) {
        // The Xid events that came are had with every reading (a cell's end asks for both).
        if (events) take_xid_events(*lib, events->get(), handles, state, event_buffer, on_device);
        sample_devices(*lib, handles, state, buffer);
        // The API versions in it are settled after the first samples: rebuilt only then.
        if (auto reason = describe(); reason != state.reason) state.reason = std::move(reason);
        publish(state, serving);
        // A cell edge's sample leaves the schedule as it was.
        while (due && next_sample <= now)
          next_sample += interval_.count();
        continue;
      }
      // NVML's event wait cannot be woken, so the worker never blocks in it: it sleeps where
      // a cell's end wakes it at once, and takes the Xid events that came after each sleep.
      const auto slice = std::min<std::int64_t>(next_sample - now, kWaitSliceMs);
      {
        std::unique_lock lock(mutex_);
        wake_.wait_for(lock, std::chrono::milliseconds(slice),
                       [this] { return requests_ != served_ || stopping_; });
      }
      if (events) take_xid_events(*lib, events->get(), handles, state, event_buffer, on_device);
    }
  } catch (const std::exception& e) {
    // Nothing may leave the thread; the probe reports what happened.
    state.phase = GpuState::Phase::unavailable;
    state.reason = std::string("NVML probe stopped: ") + e.what();
    publish(state);
  }
}

}  // namespace kwd::probes::nvml
