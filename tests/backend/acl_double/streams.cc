// TEST DOUBLE: asynchronous streams (streams.h), the stream calls of the ACL
// API and the host side of copies (aclrtMallocHost / aclrtFreeHost).
#include "streams.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include <sys/prctl.h>

#include "runtime_state.h"

namespace acl_double {

Stream::Stream(int32_t device) : device_(device), worker_(&Stream::Work, this) {}

Stream::~Stream()
{
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();  // abandoned: aclrtDestroyStreamForce (aclrtDestroyStream drained
                     // first)
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
  auto drained = [this, aborts] {
    return stopping_ || aborts_ != aborts || (queue_.empty() && !busy_);
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

// Forgets the stream and destroys it without waiting: queued work is
// abandoned, a running task interrupted.
aclError
DestroyNow(const char* call, Stream* s)
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
  lock.unlock();  // a task that is finishing takes g_mu: join without it
  delete s;
  return ACL_SUCCESS;
}

}  // namespace

extern "C" {

aclError
aclrtCreateStream(aclrtStream* stream)
{
  DOUBLE_ENTER("aclrtCreateStream");
  DOUBLE_NEED_DEVICE("aclrtCreateStream");
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
  return DestroyNow("aclrtDestroyStream", s);
}

// CANN: "if the stream has unfinished tasks, destroys it by force without
// waiting for them" (aclrtDestroyStreamForce, CANN 7.0 / 8.0 / 9.0 references).
aclError
aclrtDestroyStreamForce(aclrtStream stream)
{
  return DestroyNow("aclrtDestroyStreamForce", static_cast<Stream*>(stream));
}

// CANN: stops the stream's running task and discards the queued ones; a
// synchronize waiting meanwhile returns ACL_ERROR_RT_STREAM_ABORT; NULL is
// refused (aclrtStreamAbort, CANN 8.0 / 8.5 / 9.0 references).
aclError
aclrtStreamAbort(aclrtStream stream)
{
  Stream* s = static_cast<Stream*>(stream);
  {
    DOUBLE_ENTER("aclrtStreamAbort");
    if (s == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamAbort of NULL");
    if (acl_double::g_streams.count(s) == 0) {
      return Fail(ACL_ERROR_RT_PARAM_INVALID, "unknown stream");
    }
  }
  s->Abort();  // without g_mu: the interrupted task takes it as it returns
  return ACL_SUCCESS;
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
  // The bytes move when the stream reaches the copy, not now.
  s->Enqueue(
      [dst, src, count](Stream&) {
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
