// TEST DOUBLE: asynchronous streams (streams.h), the stream calls of the ACL
// API, the device synchronize, and the host side of copies (aclrtMallocHost /
// aclrtFreeHost).
//
// $NPU_GE_DOUBLE_PRODUCT names the Ascend product the double stands for, as
// CANN's "product support" tables name them (aclrtStreamAbort in the 8.3.RC1,
// 8.5.0, 9.0.0 and 9.1.0 references):
//   atlas_a2 (default), atlas_a3, atlas_350   aclrtStreamAbort supported
//   atlas_inference (310P), atlas_training,   aclrtStreamAbort marked
//   atlas_200i_500_a2                         unsupported: the symbol exists,
//                                             the call returns
//                                             ACL_ERROR_RT_FEATURE_NOT_SUPPORT
// aclrtSynchronizeDeviceWithTimeout is supported on all of them (8.5.0, 9.0.0
// tables).
#include "streams.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>

#include "runtime_state.h"

namespace acl_double {

Stream::Stream(int32_t device) : device_(device), worker_(&Stream::Work, this) {}

Stream::~Stream()
{
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();  // empty: aclrtDestroyStream drained it first
  }
  work_cv_.notify_all();
  done_cv_.notify_all();
  stop_cv_.notify_all();
  worker_.join();
}

void
Stream::Enqueue(Task task, bool instant)
{
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A stream in error runs nothing; during an abort new tasks take no effect.
    if (error_.code != ACL_SUCCESS || aborting_) return;
    queue_.push_back({std::move(task), std::chrono::steady_clock::now(), instant});
  }
  if (!instant) work_cv_.notify_one();
}

void
Stream::RunFront(std::unique_lock<std::mutex>& lock)
{
  Task task = std::move(queue_.front().task);
  task_start_ = std::max(queue_.front().queued_at, last_end_);
  queue_.pop_front();
  busy_ = true;
  lock.unlock();
  TaskResult result = task(*this);
  lock.lock();
  last_end_ = std::chrono::steady_clock::now();
  busy_ = false;
  // An aborted task's result is discarded with the rest of the stream's work.
  if (result.status_only) {
    if (status_.code == ACL_SUCCESS && !aborting_) status_ = std::move(result);
  } else if (result.code != ACL_SUCCESS && error_.code == ACL_SUCCESS && !aborting_) {
    error_ = std::move(result);
    queue_.clear();
  }
  done_cv_.notify_all();
}

void
Stream::Work()
{
  // Linux's default 50 us timer slack would add to every modelled execution
  // time; the cost model (delay_us + delay_per_row_us x rows) is the contract.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [this] { return stopping_ || (!queue_.empty() && !busy_); });
    if (stopping_) return;
    RunFront(lock);
  }
}

TaskResult
Stream::Synchronize(int32_t timeout_ms)
{
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t aborts = aborts_;
  // Instant work at the front runs here, in order (never beside a running task).
  while (!stopping_ && !busy_ && !queue_.empty() && queue_.front().instant) {
    RunFront(lock);
  }
  if (!queue_.empty()) work_cv_.notify_one();  // timed work, or the worker is on a task
  // An abort wakes it only once it finished: the caller may destroy the
  // stream as soon as this returns.
  auto drained = [this, aborts] {
    return stopping_ || (!aborting_ && (aborts_ != aborts || (queue_.empty() && !busy_)));
  };
  if (timeout_ms < 0) {
    done_cv_.wait(lock, drained);
  } else if (!done_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), drained)) {
    return TaskResult{
        ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
        "stream work did not finish within " + std::to_string(timeout_ms) + " ms"};
  }
  if (aborts_ != aborts) {
    return TaskResult{
        ACL_ERROR_RT_STREAM_ABORT, "the stream was aborted (aclrtStreamAbort) meanwhile"};
  }
  TaskResult result = std::move(error_.code != ACL_SUCCESS ? error_ : status_);
  error_ = TaskResult{};
  status_ = TaskResult{};
  return result;
}

void
Stream::Drain()
{
  Synchronize(-1);  // its result is the destroyed stream's: dropped
}

void
Stream::Abort()
{
  std::unique_lock<std::mutex> lock(mu_);
  aborting_ = true;
  ++aborts_;
  queue_.clear();
  stop_cv_.notify_all();  // a sleeping (delayed or hung) task returns
  done_cv_.notify_all();  // waiting synchronizers return ACL_ERROR_RT_STREAM_ABORT
  done_cv_.wait(lock, [this] { return !busy_; });
  queue_.clear();  // nothing queued meanwhile survives either
  error_ = TaskResult{};
  status_ = TaskResult{};
  aborting_ = false;
  done_cv_.notify_all();  // synchronizers waiting for the abort to finish
}

void
Stream::Orphan()
{
  {
    std::lock_guard<std::mutex> lock(mu_);
    orphaned_ = true;
  }
  work_cv_.notify_all();  // the worker runs the instant work nobody will sync for
}

bool
Stream::WaitIdle(std::chrono::steady_clock::time_point deadline)
{
  std::unique_lock<std::mutex> lock(mu_);
  if (!queue_.empty()) work_cv_.notify_one();  // instant work: the worker runs it
  return done_cv_.wait_until(lock, deadline, [this] { return queue_.empty() && !busy_; });
}

bool
Stream::SleepUntil(std::chrono::steady_clock::time_point deadline)
{
  std::unique_lock<std::mutex> lock(mu_);
  auto interrupted = [this] { return stopping_ || aborting_; };
  if (deadline == std::chrono::steady_clock::time_point::max()) {
    stop_cv_.wait(lock, interrupted);
    return false;
  }
  return !stop_cv_.wait_until(lock, deadline, interrupted);
}

// ---- late work of force-destroyed streams -------------------------------------
std::set<Stream*> g_orphan_streams;
uint64_t g_late_writes = 0;
uint64_t g_touched_freed_memory = 0;
std::map<int32_t, aclError> g_lost_devices;

aclError
LostCodeLocked(int32_t device)
{
  auto it = g_lost_devices.find(device);
  return it == g_lost_devices.end() ? ACL_SUCCESS : it->second;
}

namespace {
uint64_t g_allocation_serial = 0;
constexpr uint64_t kHostBlock = ~0ull;  // SerialOfLocked: an aclrtMallocHost block
}  // namespace

uint64_t
NextAllocationSerial()
{
  return ++g_allocation_serial;
}

uint64_t
SerialOfLocked(const void* p, size_t n)
{
  if (g_host_blocks.count(const_cast<void*>(p)) > 0) return kHostBlock;
  const Allocation* a = FindAllocationLocked(p, n);
  return a == nullptr ? 0 : a->serial;
}

bool
StillOwnedLocked(const void* p, size_t n, uint64_t serial, bool late)
{
  bool owned = true;  // serial 0: memory the double does not track
  if (serial == kHostBlock) {
    owned = g_host_blocks.count(const_cast<void*>(p)) > 0;
  } else if (serial != 0) {
    const Allocation* a = FindAllocationLocked(p, n);
    owned = a != nullptr && a->serial == serial;
  }
  if (!owned) {
    ++g_touched_freed_memory;
  } else if (late) {
    ++g_late_writes;
  }
  if (!owned || late) WriteStreamStateLocked();
  return owned;
}

void
WriteStreamStateLocked()
{
  const char* state = std::getenv("NPU_GE_DOUBLE_STATE_FILE");
  if (state == nullptr) return;
  const std::string path = std::string(state) + ".streams";
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  std::string lost, codes;
  for (const auto& kv : g_lost_devices) {
    lost += (lost.empty() ? "" : ", ") + std::to_string(kv.first);
    codes += std::string(codes.empty() ? "" : ", ") + "\"" + std::to_string(kv.first) +
             "\": " + std::to_string(kv.second);
  }
  std::fprintf(
      f,
      "{\"orphan_streams\": %zu, \"late_writes\": %llu, "
      "\"touched_freed_memory\": %llu, \"lost_devices\": [%s], "
      "\"device_error_codes\": {%s}}\n",
      g_orphan_streams.size(), static_cast<unsigned long long>(g_late_writes),
      static_cast<unsigned long long>(g_touched_freed_memory), lost.c_str(),
      codes.c_str());
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());
}

// ---- device busy time -------------------------------------------------------
namespace {

using Clock = std::chrono::steady_clock;
std::mutex g_busy_mu;
std::map<int32_t, std::deque<std::pair<Clock::time_point, Clock::time_point>>> g_busy;
constexpr std::chrono::seconds kBusyHistory{10};  // longest window anyone asks for

}  // namespace

void
RecordBusy(int32_t device, Clock::time_point start, Clock::time_point end)
{
  std::lock_guard<std::mutex> lock(g_busy_mu);
  auto& intervals = g_busy[device];
  intervals.emplace_back(start, end);
  while (!intervals.empty() && intervals.front().second < end - kBusyHistory) {
    intervals.pop_front();
  }
}

double
BusyPercent(int32_t device, std::chrono::milliseconds window)
{
  const Clock::time_point now = Clock::now();
  const Clock::time_point from = now - window;
  std::lock_guard<std::mutex> lock(g_busy_mu);
  double busy_ns = 0;
  for (const auto& iv : g_busy[device]) {
    const auto begin = std::max(iv.first, from);
    const auto end = std::min(iv.second, now);
    if (end > begin)
      busy_ns += std::chrono::duration<double, std::nano>(end - begin).count();
  }
  const double window_ns = std::chrono::duration<double, std::nano>(window).count();
  return std::min(100.0, 100.0 * busy_ns / window_ns);
}

}  // namespace acl_double

using acl_double::Fail;
using acl_double::Stream;

namespace {

// The stream, when it exists and belongs to `device`; else nullptr.
Stream*
StreamOnDeviceLocked(aclrtStream stream, int32_t device)
{
  Stream* s = static_cast<Stream*>(stream);
  if (acl_double::g_streams.count(s) == 0 || s->device() != device) return nullptr;
  return s;
}

aclError
Synchronize(const char* call, aclrtStream stream, int32_t timeout_ms)
{
  Stream* s = static_cast<Stream*>(stream);
  {
    std::lock_guard<std::mutex> lock(acl_double::g_mu);
    if (acl_double::ShouldFail(call)) {
      return Fail(ACL_ERROR_RT_PARAM_INVALID, std::string(call) + " failure injected");
    }
    if (!acl_double::g_initialized) {
      return Fail(ACL_ERROR_UNINITIALIZE, std::string(call) + " before aclInit");
    }
    if (acl_double::g_streams.count(s) == 0) {
      return Fail(ACL_ERROR_RT_PARAM_INVALID, "unknown stream");
    }
  }
  // Waited for without g_mu: the queued work takes it to count executions.
  // (A stream destroyed meanwhile by another thread is the caller's bug.)
  acl_double::TaskResult r = s->Synchronize(timeout_ms);
  if (r.code != ACL_SUCCESS) return Fail(r.code, r.message);
  return ACL_SUCCESS;
}

// Forgets the stream. aclrtDestroyStream (drained before): deletes it.
// aclrtDestroyStreamForce (`orphan`): its work goes on (Stream::Orphan).
aclError
DestroyNow(const char* call, Stream* s, bool orphan)
{
  std::unique_lock<std::mutex> lock(acl_double::g_mu);
  if (acl_double::ShouldFail(call)) {
    return Fail(ACL_ERROR_RT_PARAM_INVALID, std::string(call) + " failure injected");
  }
  if (!acl_double::g_initialized) {
    return Fail(ACL_ERROR_UNINITIALIZE, std::string(call) + " before aclInit");
  }
  if (acl_double::g_streams.erase(s) == 0) {
    return Fail(ACL_ERROR_RT_PARAM_INVALID, "unknown stream");
  }
  acl_double::WriteStateLocked();
  if (orphan) {
    acl_double::g_orphan_streams.insert(s);
    acl_double::WriteStreamStateLocked();
    lock.unlock();
    s->Orphan();
    return ACL_SUCCESS;
  }
  lock.unlock();  // a task that is finishing takes g_mu: join without it
  delete s;
  return ACL_SUCCESS;
}

// The product the double stands for; false (message set) when unknown.
bool
StreamAbortSupported(bool* supported)
{
  const char* v = std::getenv("NPU_GE_DOUBLE_PRODUCT");
  const std::string product = v == nullptr || *v == '\0' ? "atlas_a2" : v;
  static const std::set<std::string> with_abort = {"atlas_a2", "atlas_a3", "atlas_350"};
  static const std::set<std::string> without_abort = {
      "atlas_inference", "atlas_training", "atlas_200i_500_a2"};
  *supported = with_abort.count(product) > 0;
  if (*supported || without_abort.count(product) > 0) return true;
  Fail(ACL_ERROR_INVALID_PARAM, "unknown NPU_GE_DOUBLE_PRODUCT '" + product + "'");
  return false;
}

}  // namespace

extern "C" {

aclError
aclrtCreateStream(aclrtStream* stream)
{
  DOUBLE_ENTER("aclrtCreateStream");
  DOUBLE_NEED_DEVICE("aclrtCreateStream");
  if (const aclError lost = acl_double::LostCodeLocked(device)) {
    return Fail(lost, "the device is in error (ACL error " + std::to_string(lost) + ")");
  }
  Stream* s = new Stream(device);
  acl_double::g_streams.insert(s);
  *stream = s;
  acl_double::WriteStateLocked();
  return ACL_SUCCESS;
}

// CANN: "if the stream has unfinished tasks, waits for them to finish before
// destroying it" (aclrtDestroyStream, CANN 8.0 API reference): a hung
// execution blocks this call forever, as it would on a device.
aclError
aclrtDestroyStream(aclrtStream stream)
{
  Stream* s = static_cast<Stream*>(stream);
  {
    DOUBLE_ENTER("aclrtDestroyStream");
    if (acl_double::g_streams.count(s) == 0) {
      return Fail(ACL_ERROR_RT_PARAM_INVALID, "unknown stream");
    }
  }
  s->Drain();  // without g_mu: the queued work takes it
  return DestroyNow("aclrtDestroyStream", s, false);
}

// CANN: destroys the stream without waiting for its unfinished tasks
// (aclrtDestroyStreamForce, CANN 7.0 / 8.0 / 9.0 references). Nothing more is
// promised, so nothing more is done: the running task and the queued ones go
// on and write into their buffers after this returns (Stream::Orphan).
aclError
aclrtDestroyStreamForce(aclrtStream stream)
{
  return DestroyNow("aclrtDestroyStreamForce", static_cast<Stream*>(stream), true);
}

// CANN: stops the stream's running task and discards the queued ones; a
// synchronize waiting meanwhile returns ACL_ERROR_RT_STREAM_ABORT; NULL is
// refused (aclrtStreamAbort, CANN 8.0 / 8.5 / 9.0 references). Unsupported on
// Atlas inference (310P), Atlas training and Atlas 200I/500 A2 products
// (8.3.RC1, 8.5.0, 9.0.0, 9.1.0 product tables): $NPU_GE_DOUBLE_PRODUCT.
aclError
aclrtStreamAbort(aclrtStream stream)
{
  Stream* s = static_cast<Stream*>(stream);
  {
    DOUBLE_ENTER("aclrtStreamAbort");
    bool supported = false;
    if (!StreamAbortSupported(&supported)) return ACL_ERROR_INVALID_PARAM;
    if (!supported) {
      return Fail(
          ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
          "aclrtStreamAbort is not supported on this product (NPU_GE_DOUBLE_PRODUCT=" +
              std::string(std::getenv("NPU_GE_DOUBLE_PRODUCT")) + ")");
    }
    if (s == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamAbort of NULL");
    if (acl_double::g_streams.count(s) == 0) {
      return Fail(ACL_ERROR_RT_PARAM_INVALID, "unknown stream");
    }
  }
  s->Abort();  // without g_mu: the interrupted task takes it as it returns
  return ACL_SUCCESS;
}

// CANN: blocks until the device of the current context finished its work;
// -1 waits for ever, > 0 is a bound in ms, and a timed-out wait returns
// ACL_ERROR_RT_STREAM_SYNC_TIMEOUT (aclrtSynchronizeDeviceWithTimeout, CANN
// 8.0 / 8.5 / 9.0 references; every product). The double waits for every
// stream of the device, those destroyed by force included: their work is the
// device's until it ends. A lost device answers with its loss.
aclError
aclrtSynchronizeDeviceWithTimeout(int32_t timeout)
{
  std::vector<Stream*> streams;
  {
    DOUBLE_ENTER("aclrtSynchronizeDeviceWithTimeout");
    DOUBLE_NEED_DEVICE("aclrtSynchronizeDeviceWithTimeout");
    if (timeout < -1 || timeout == 0) {
      return Fail(ACL_ERROR_INVALID_PARAM, "timeout must be -1 or a positive ms count");
    }
    if (const aclError lost = acl_double::LostCodeLocked(device)) {
      return Fail(
          lost, "the device is in error (ACL error " + std::to_string(lost) + ")");
    }
    for (Stream* s : acl_double::g_streams) {
      if (s->device() == device) streams.push_back(s);
    }
    for (Stream* s : acl_double::g_orphan_streams) {
      if (s->device() == device) streams.push_back(s);
    }
  }
  // Without g_mu: the work waited for takes it. (A stream destroyed meanwhile
  // by another thread is the caller's bug, as with aclrtSynchronizeStream.)
  const auto deadline =
      timeout < 0 ? std::chrono::steady_clock::time_point::max()
                  : std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
  for (Stream* s : streams) {
    if (!s->WaitIdle(deadline)) {
      return Fail(
          ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
          "device work did not finish within " + std::to_string(timeout) + " ms");
    }
  }
  return ACL_SUCCESS;
}

aclError
aclrtSynchronizeDevice()
{
  return aclrtSynchronizeDeviceWithTimeout(-1);
}

aclError
aclrtSynchronizeStream(aclrtStream stream)
{
  return Synchronize("aclrtSynchronizeStream", stream, -1);
}

aclError
aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)
{
  if (timeout < -1) {
    return Fail(ACL_ERROR_INVALID_PARAM, "timeout must be -1, 0 or a positive ms count");
  }
  return Synchronize("aclrtSynchronizeStreamWithTimeout", stream, timeout);
}

aclError
aclrtMemcpyAsync(
    void* dst, size_t dest_max, const void* src, size_t count, aclrtMemcpyKind kind,
    aclrtStream stream)
{
  DOUBLE_ENTER("aclrtMemcpyAsync");
  DOUBLE_NEED_DEVICE("aclrtMemcpyAsync");
  if (count > dest_max) {
    return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpyAsync count > destMax");
  }
  if (kind != ACL_MEMCPY_HOST_TO_DEVICE && kind != ACL_MEMCPY_DEVICE_TO_HOST) {
    return Fail(ACL_ERROR_INVALID_PARAM, "the double copies host<->device only");
  }
  const void* dev = kind == ACL_MEMCPY_HOST_TO_DEVICE ? dst : src;
  const acl_double::Allocation* a = acl_double::FindAllocationLocked(dev, count);
  if (a == nullptr || a->device != device) {
    return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpyAsync outside this device's memory");
  }
  Stream* s = StreamOnDeviceLocked(stream, device);
  if (s == nullptr) {
    return Fail(ACL_ERROR_RT_STREAM_CONTEXT, "stream not on the current device");
  }
  if (const aclError lost = acl_double::LostCodeLocked(device)) {
    return Fail(lost, "the device is in error (ACL error " + std::to_string(lost) + ")");
  }
  // The bytes move when the stream reaches the copy, not now, and only while
  // both ends are still the memory they were (a late copy of a stream destroyed
  // by force is counted: streams.h).
  const uint64_t dst_serial = acl_double::SerialOfLocked(dst, count);
  const uint64_t src_serial = acl_double::SerialOfLocked(src, count);
  s->Enqueue(
      [dst, src, count, dst_serial, src_serial](Stream& on) {
        std::lock_guard<std::mutex> lock(acl_double::g_mu);
        const bool late = on.orphaned();
        if (!acl_double::StillOwnedLocked(src, count, src_serial, false) ||
            !acl_double::StillOwnedLocked(dst, count, dst_serial, late)) {
          return acl_double::TaskResult{
              ACL_ERROR_INVALID_PARAM, "a copy ran after its memory was freed"};
        }
        std::memcpy(dst, src, count);
        return acl_double::TaskResult{};
      },
      /*instant=*/true);
  return ACL_SUCCESS;
}

aclError
aclrtMallocHost(void** ptr, size_t size)
{
  DOUBLE_ENTER("aclrtMallocHost");
  if (size == 0) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost of 0 bytes");
  *ptr = std::malloc(size);
  if (*ptr == nullptr) return Fail(ACL_ERROR_BAD_ALLOC, "out of host memory");
  acl_double::g_host_blocks.insert(*ptr);
  acl_double::WriteStateLocked();
  return ACL_SUCCESS;
}

aclError
aclrtFreeHost(void* ptr)
{
  DOUBLE_ENTER("aclrtFreeHost");
  if (acl_double::g_host_blocks.erase(ptr) == 0) {
    return Fail(
        ACL_ERROR_INVALID_PARAM, "aclrtFreeHost of memory not from aclrtMallocHost");
  }
  std::free(ptr);
  acl_double::WriteStateLocked();
  return ACL_SUCCESS;
}

}  // extern "C"
