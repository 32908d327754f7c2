// TEST DOUBLE: asynchronous streams. Like a real NPU stream, each Stream runs
// the work queued on it (copies, model executions) in order, on a worker
// thread of its own, while the host thread that queued it goes on: a caller
// that reads a result before aclrtSynchronizeStream[WithTimeout] sees stale
// memory. The first failure of queued work is kept and returned by the next
// synchronize; work queued after a failure is discarded until then (a stream
// in error runs nothing). As CANN documents (CANN 8.0 API reference, "Stream
// management"): aclrtDestroyStream waits for the stream's unfinished work (so
// a hung execution blocks it forever); aclrtDestroyStreamForce destroys it
// without waiting, and that is all it promises (CANN 7.0 / 8.0 / 9.0
// references): the double ORPHANS the stream (Orphan below): its handle is
// gone, but the running task goes on and the queued ones still run, writing
// into their buffers after the call, and a hung task hangs for ever.
// aclrtStreamAbort stops the running task, discards the queued ones, and a
// synchronize waiting meanwhile returns ACL_ERROR_RT_STREAM_ABORT; the stream
// stays usable; on the products whose CANN tables mark it unsupported
// ($NPU_GE_DOUBLE_PRODUCT, streams.cc) it returns
// ACL_ERROR_RT_FEATURE_NOT_SUPPORT and stops nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "acl/acl.h"

namespace acl_double {

struct TaskResult {
  aclError code = ACL_SUCCESS;
  std::string message;  // becomes aclGetRecentErrMsg() of the synchronizing thread
  // A status, not a failure (CANN's overflow-type codes): the task completed,
  // the stream goes on, the next synchronize returns the code unless a
  // failure came too.
  bool status_only = false;
};

class Stream {
 public:
  using Task = std::function<TaskResult(Stream&)>;

  explicit Stream(int32_t device);
  ~Stream();  // after Drain only (aclrtDestroyStream): stops the idle worker, joins
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int32_t device() const { return device_; }
  // Queues `task`. An `instant` one takes no modelled time (a copy, a
  // zero-cost execution): it wakes nobody, and the thread that synchronizes
  // runs it itself, as a device that finished at once would let the sync
  // return at once; anything timed is run by the stream's worker thread.
  void Enqueue(Task task, bool instant);
  // Waits until the queue drained; timeout_ms -1 waits forever, 0 only checks.
  // Returns the first failure since the last synchronize (and clears it), else
  // the first status-only code (an overflow), or ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
  // when the work did not finish in time.
  // ACL_ERROR_RT_STREAM_ABORT when aclrtStreamAbort ran while it waited.
  TaskResult Synchronize(int32_t timeout_ms);
  // aclrtDestroyStream's wait: until every queued task ran (forever for a hang).
  void Drain();
  // aclrtStreamAbort: interrupts the running task, discards the queued ones
  // and any failure, wakes waiting synchronizers; returns once the running
  // task stopped. Tasks queued meanwhile do not take effect.
  void Abort();
  // aclrtDestroyStreamForce: the handle is gone, the work is not. The worker
  // runs what is queued (instant tasks too) to the end; a hang stays hung.
  // The stream is never deleted (kept reachable by g_orphan_streams).
  void Orphan();
  bool orphaned() const { return orphaned_; }
  // aclrtSynchronizeDevice's wait for this stream: until nothing is queued or
  // running, or `deadline`; consumes no error or status (they stay for the
  // stream's own synchronize). False on the deadline.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);

  // For tasks: sleeps until `deadline`, or less when the stream is destroyed
  // (by force) or aborted meanwhile; false when it was. SleepUntil(
  // time_point::max()) is a hang until one of them.
  bool SleepUntil(std::chrono::steady_clock::time_point deadline);
  // For tasks: when the running task began on the device's clock: when it was
  // queued, or when the task before it finished, whichever is later (the
  // worker thread's wake-up is the double's cost, not the device's).
  std::chrono::steady_clock::time_point task_start() const { return task_start_; }

 private:
  void Work();

  const int32_t device_;
  struct Queued {
    Task task;
    std::chrono::steady_clock::time_point queued_at;
    bool instant;
  };
  // Takes the front task (mu_ held), runs it without mu_, records its end.
  void RunFront(std::unique_lock<std::mutex>& lock);

  std::mutex mu_;
  std::condition_variable work_cv_;  // the worker: timed work queued, or stop
  std::condition_variable done_cv_;  // synchronizers: a task finished
  std::condition_variable stop_cv_;  // sleeping tasks: the stream is destroyed
  std::deque<Queued> queue_;
  std::chrono::steady_clock::time_point task_start_{};  // of the running task
  std::chrono::steady_clock::time_point last_end_{};    // of the task before
  bool busy_ = false;                                   // a task is running
  bool stopping_ = false;                               // being destroyed
  bool aborting_ = false;                               // in aclrtStreamAbort
  std::atomic<bool> orphaned_{false};                   // aclrtDestroyStreamForce ran
  uint64_t aborts_ = 0;                                 // aclrtStreamAbort calls
  TaskResult error_;
  TaskResult status_;  // the first status-only result since the last synchronize
  std::thread worker_;
};

// Device busy time, for aclrtGetDeviceUtilizationRate: executions record the
// interval they kept the device busy; BusyPercent is the busy share of the
// last `window` (overlapping executions of several streams count once per
// instant at most: the result is capped at 100).
void RecordBusy(
    int32_t device, std::chrono::steady_clock::time_point start,
    std::chrono::steady_clock::time_point end);
double BusyPercent(int32_t device, std::chrono::milliseconds window);

}  // namespace acl_double
