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
    queue_.clear();  // abandoned, as when a real stream is destroyed by force
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
    if (error_.code != ACL_SUCCESS) return;  // a stream in error runs nothing
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
  if (result.code != ACL_SUCCESS && error_.code == ACL_SUCCESS) {
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
  // Instant work at the front runs here, in order (never beside a running task).
  while (!stopping_ && !busy_ && !queue_.empty() && queue_.front().instant) {
    RunFront(lock);
  }
  if (!queue_.empty()) work_cv_.notify_one();  // timed work, or the worker is on a task
  auto drained = [this] { return stopping_ || (queue_.empty() && !busy_); };
  if (timeout_ms < 0) {
    done_cv_.wait(lock, drained);
  } else if (!done_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), drained)) {
    return TaskResult{
        ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
        "stream work did not finish within " + std::to_string(timeout_ms) + " ms"};
  }
  TaskResult result = std::move(error_);
  error_ = TaskResult{};
  return result;
}

bool
Stream::SleepUntil(std::chrono::steady_clock::time_point deadline)
{
  std::unique_lock<std::mutex> lock(mu_);
  if (deadline == std::chrono::steady_clock::time_point::max()) {
    stop_cv_.wait(lock, [this] { return stopping_; });
    return false;
  }
  return !stop_cv_.wait_until(lock, deadline, [this] { return stopping_; });
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

aclError
aclrtDestroyStream(aclrtStream stream)
{
  DOUBLE_ENTER("aclrtDestroyStream");
  Stream* s = static_cast<Stream*>(stream);
  if (acl_double::g_streams.erase(s) == 0) {
    return Fail(ACL_ERROR_RT_PARAM_INVALID, "unknown stream");
  }
  acl_double::WriteStateLocked();
  lock.unlock();  // a task that is finishing takes g_mu: join without it
  delete s;
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
