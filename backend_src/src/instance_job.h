// The bookkeeping of one Execute call's requests and of one execution (a
// Job), shared by instance_execute.cc (gather, launch, answer) and
// model_instance_state.cc (the pipeline and its completion thread).
#pragma once

#include <vector>

#include "model_instance_state.h"
#include "triton_utils.h"

namespace npu_ge {

struct ModelInstanceState::Slot {
  TRITONBACKEND_Request* request = nullptr;
  TRITONBACKEND_Response* response = nullptr;
  TRITONSERVER_Error* error = nullptr;  // owned; first failure wins
  size_t rows = 0;
  size_t gear = 0;  // dims/image size gear its shapes picked (gear models)
  uint64_t compute_start_ns = 0;
  uint64_t compute_end_ns = 0;
  bool done = false;  // outputs are in the response

  void Fail(TRITONSERVER_Error* err)
  {
    if (err == nullptr) return;
    if (error == nullptr) {
      error = err;
    } else {
      TRITONSERVER_ErrorDelete(err);
    }
  }

  // Moves the request (and what is owed to it) out; `from` is left empty.
  static Slot Take(Slot& from)
  {
    Slot taken = from;
    from = Slot();
    return taken;
  }
};

struct ModelInstanceState::Job {
  std::vector<Slot> slots;      // this execution's requests, in batch order
  std::vector<size_t> offsets;  // first row of each
  size_t rows = 0;              // real rows
  size_t exec_rows = 0;         // rows the model runs (gear or static batch)
  size_t shape_gear = 0;        // dims/image size gear (one request per job)
  size_t set = 0;               // buffer set, while holds_set
  bool holds_set = false;
  bool launched = false;  // device work queued, Wait owed
  uint64_t exec_start_ns = 0;
  uint64_t compute_start_ns = 0;
  uint64_t compute_end_ns = 0;

  void FailAll(TRITONSERVER_Error* err)  // takes err
  {
    for (Slot& slot : slots) slot.Fail(CopyError(err));
    TRITONSERVER_ErrorDelete(err);
  }
};

}  // namespace npu_ge
