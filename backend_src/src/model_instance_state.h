// ModelInstanceState: one model instance = one NPU device, one context, one
// stream and device buffers preallocated for the largest execution (owned by
// the engine instance). Execute gathers the requests Triton's dynamic batcher
// hands over, runs them, scatters the outputs and answers every request.
#pragma once

#include <memory>
#include <string>
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

  // Answers and releases every request exactly once and returns nullptr. It
  // throws only before touching any request (std::bad_alloc), so the entry
  // point can hand the error, and the requests, back to Triton.
  TRITONSERVER_Error* Execute(TRITONBACKEND_Request** requests, uint32_t count);

  const std::string& log_prefix() const { return log_prefix_; }

 private:
  struct Slot;  // per-request bookkeeping of one Execute call
  ModelInstanceState() = default;

  TRITONSERVER_Error* ReportMemory();
  bool Admit(Slot& slot);  // response, cancellation, validation
  void FailUnanswered(std::vector<Slot>& slots, const char* what) noexcept;
  TRITONSERVER_Error* ValidateRequest(TRITONBACKEND_Request* request, size_t* rows);
  void RunChunk(
      std::vector<Slot>& slots, const std::vector<size_t>& members,
      uint64_t exec_start_ns);
  TRITONSERVER_Error* Gather(const Slot& slot, size_t row_offset);
  TRITONSERVER_Error* Scatter(const Slot& slot, size_t row_offset);
  void Finish(std::vector<Slot>& slots, uint64_t exec_start_ns) noexcept;

  ModelState* model_ = nullptr;
  TRITONBACKEND_ModelInstance* instance_ = nullptr;
  std::string name_;
  int32_t device_ = -1;
  std::string log_prefix_;
  std::unique_ptr<EngineInstance> engine_;
  std::unique_ptr<TelemetryRegistration> telemetry_;
};

}  // namespace npu_ge
