// ModelInstanceState: one model instance = one NPU device, one context, one
// stream and device buffers preallocated for the largest execution (owned by
// the engine instance). Execute gathers the requests Triton's dynamic batcher
// hands over, runs them, scatters the outputs and answers every request.
//
// With an engine of two buffer sets (acl_om with copy_overlap) executions are
// pipelined across Execute calls: Execute gathers batch N+1 into one set
// while batch N runs on the device from the other, launches N+1 as soon as
// N's device work is done, and returns; a completion thread waits for each
// launched execution, scatters it, answers and releases its requests. So the
// host-side gather of N+1 and the answers of N overlap device work; device
// copies and compute stay in order on the one stream.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine.h"
#include "model_state.h"
#include "telemetry.h"

namespace npu_ge {

class ModelInstanceState {
 public:
  static TRITONSERVER_Error* Create(
      ModelState* model, TRITONBACKEND_ModelInstance* instance,
      std::unique_ptr<ModelInstanceState>* state);
  // Waits for executions still in flight (each answers its requests) and
  // joins the completion thread.
  ~ModelInstanceState();

  // Answers and releases every request exactly once (when pipelined, some of
  // them after it returned) and returns nullptr. It throws only before
  // touching any request (std::bad_alloc), so the entry point can hand the
  // error, and the requests, back to Triton.
  TRITONSERVER_Error* Execute(TRITONBACKEND_Request** requests, uint32_t count);

  const std::string& log_prefix() const { return log_prefix_; }
  // nullptr while the instance can execute; else why not (a lost device,
  // executions nothing could stop): TRITONBACKEND_ModelInstanceReady.
  TRITONSERVER_Error* Ready() const;

 private:
  struct Slot;  // per-request bookkeeping
  struct Job;   // one execution: its requests, buffer set and timings
  ModelInstanceState() = default;

  TRITONSERVER_Error* ReportMemory();
  bool Admit(Slot& slot);  // response, cancellation, validation
  void FailUnanswered(std::vector<Slot>& slots, const char* what) noexcept;
  // Rows of the request and, for a model with dims/image size gears, the
  // gear its shapes pick.
  TRITONSERVER_Error* ValidateRequest(
      TRITONBACKEND_Request* request, size_t* rows, size_t* gear);
  size_t InputBytes(const Slot& slot, size_t config_input) const;
  void RunJob(Job& job) noexcept;
  void HandOver(std::unique_ptr<Job> job) noexcept;
  bool Prepare(Job& job);        // recover if needed, gather, launch; false: not launched
  bool GatherAll(Job& job);      // false when no request of the job is left to run
  bool DropCancelled(Job& job);  // answers cancelled ones; false: none left
  void FailIfCancelled(Slot& slot);
  void Complete(Job& job) noexcept;  // wait, scatter, answer, release
  TRITONSERVER_Error* Gather(const Slot& slot, size_t row_offset, size_t set);
  TRITONSERVER_Error* Scatter(const Slot& slot, size_t row_offset, size_t set);
  void Finish(std::vector<Slot>& slots, uint64_t exec_start_ns) noexcept;

  // Pipeline bookkeeping (mu_).
  size_t AcquireSet();
  void ReleaseSet(size_t set);
  // Until no launched execution is in flight; `held` requests (published in
  // npu_ge_instance_held_requests) wait meanwhile.
  void WaitDeviceIdle(size_t held);
  void SetDeviceBusy(bool busy);
  // Rebuilds the engine's device state once nothing else is in flight.
  TRITONSERVER_Error* RecoverWhenIdle();
  void CompletionLoop();
  // Publishes the engine's recovery state: device-class errors (counted per
  // device and code), parked executions, a lost device (counted once), out
  // of service.
  void NoteHealth() noexcept;

  ModelState* model_ = nullptr;
  TRITONBACKEND_ModelInstance* instance_ = nullptr;
  std::string name_;
  int32_t device_ = -1;
  std::string log_prefix_;
  std::unique_ptr<EngineInstance> engine_;
  std::unique_ptr<TelemetryRegistration> telemetry_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> set_free_;  // per buffer set: not being gathered or run
  bool device_busy_ = false;    // a launched execution was not waited for yet
  std::deque<std::unique_ptr<Job>> launched_;  // for the completion thread
  bool stopping_ = false;
  std::atomic<bool> overflow_logged_{false};
  std::atomic<bool> device_lost_counted_{false};
  std::thread completer_;  // only with more than one buffer set
};

}  // namespace npu_ge
