// ModelInstanceState::Execute: gather -> run -> scatter for a batch formed by
// Triton's dynamic batcher. Every request gets exactly one response (an error
// response when anything about it failed), statistics are always reported,
// and every request is released exactly once, in Finish().
#include <cstdio>
#include <cstring>
#include <set>

#include "batching.h"
#include "dtype.h"
#include "model_instance_state.h"
#include "triton_utils.h"

namespace npu_ge {

struct ModelInstanceState::Slot {
  TRITONBACKEND_Request* request = nullptr;
  TRITONBACKEND_Response* response = nullptr;
  TRITONSERVER_Error* error = nullptr;  // owned; first failure wins
  size_t rows = 0;
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
};

TRITONSERVER_Error*
ModelInstanceState::Execute(TRITONBACKEND_Request** requests, uint32_t count)
{
  const uint64_t exec_start_ns = NowNs();
  // Until 'slots' exists no request has been touched: an exception (only
  // std::bad_alloc is realistic) reaches the entry point's guard and Triton,
  // still owning the requests, answers them with the error.
  std::vector<Slot> slots(count);
  for (uint32_t i = 0; i < count; ++i) slots[i].request = requests[i];
  try {
    std::vector<size_t> live;  // slots still worth running
    for (uint32_t i = 0; i < count; ++i) {
      if (Admit(slots[i])) live.push_back(i);
    }
    std::vector<size_t> rows;
    for (size_t i : live) rows.push_back(slots[i].rows);
    for (const auto& chunk :
         ChunkByRows(rows, model_->engine().binding().max_exec_rows)) {
      std::vector<size_t> members(
          live.begin() + chunk.first, live.begin() + chunk.second);
      RunChunk(slots, members, exec_start_ns);
    }
  }
  catch (const std::exception& e) {
    FailUnanswered(slots, e.what());
  }
  catch (...) {
    FailUnanswered(slots, "unknown exception");
  }
  Finish(slots, exec_start_ns);  // noexcept: every request is released here
  return nullptr;
}

bool
ModelInstanceState::Admit(Slot& slot)
{
  slot.Fail(TRITONBACKEND_ResponseNew(&slot.response, slot.request));
  bool cancelled = false;
  if (slot.error == nullptr) {
    slot.Fail(TRITONBACKEND_RequestIsCancelled(slot.request, &cancelled));
  }
  if (slot.error == nullptr && cancelled) {
    // The default scheduler hands cancelled requests over; the dynamic
    // batcher drops them itself. Either way they never reach the NPU.
    NPU_GE_LOG(VERBOSE, log_prefix_ << ": request cancelled before execution, not run");
    slot.Fail(NPU_GE_ERROR(CANCELLED, "request cancelled"));
  }
  if (slot.error == nullptr) {
    slot.Fail(ValidateRequest(slot.request, &slot.rows));
  }
  return slot.error == nullptr;
}

void
ModelInstanceState::FailUnanswered(std::vector<Slot>& slots, const char* what) noexcept
{
  for (Slot& slot : slots) {
    if (slot.error == nullptr && !slot.done) {
      char msg[512];  // no allocation on this path
      std::snprintf(
          msg, sizeof(msg), "%s: execution aborted: %s", log_prefix_.c_str(), what);
      slot.Fail(TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, msg));
    }
  }
}

TRITONSERVER_Error*
ModelInstanceState::ValidateRequest(TRITONBACKEND_Request* request, size_t* rows)
{
  const ModelConfigSpec& spec = model_->spec();
  const bool batched = spec.max_batch_size > 0;
  *rows = 0;
  for (const TensorConfig& cfg : spec.inputs) {
    TRITONBACKEND_Input* input = nullptr;
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_RequestInput(request, cfg.name.c_str(), &input));
    TRITONSERVER_DataType dtype;
    const int64_t* shape = nullptr;
    uint32_t dims = 0;
    uint64_t bytes = 0;
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_InputProperties(
        input, nullptr, &dtype, &shape, &dims, &bytes, nullptr));
    if (dtype != cfg.dtype) {
      return NPU_GE_ERROR(
          INVALID_ARG, "input '" << cfg.name << "': expected data type "
                                 << DataTypeName(cfg.dtype) << ", got "
                                 << DataTypeName(dtype));
    }
    std::vector<int64_t> got(shape, shape + dims);
    std::vector<int64_t> item(got);
    size_t r = 1;
    if (batched) {
      if (got.empty() || got[0] < 1 || got[0] > spec.max_batch_size) {
        return NPU_GE_ERROR(
            INVALID_ARG, "input '" << cfg.name << "': expected a batch dimension in [1, "
                                   << spec.max_batch_size << "], got shape "
                                   << DimsToString(got));
      }
      r = static_cast<size_t>(got[0]);
      item.erase(item.begin());
    }
    if (item != cfg.dims) {
      return NPU_GE_ERROR(
          INVALID_ARG, "input '" << cfg.name << "': expected dims "
                                 << DimsToString(cfg.dims) << ", got shape "
                                 << DimsToString(got));
    }
    if (*rows != 0 && r != *rows) {
      return NPU_GE_ERROR(
          INVALID_ARG, "input '" << cfg.name << "': expected batch size " << *rows
                                 << " like the other inputs, got " << r);
    }
    *rows = r;
    if (bytes != r * cfg.RowBytes()) {
      return NPU_GE_ERROR(
          INVALID_ARG, "input '" << cfg.name << "': expected " << r * cfg.RowBytes()
                                 << " bytes, got " << bytes);
    }
  }
  return nullptr;
}

void
ModelInstanceState::RunChunk(
    std::vector<Slot>& slots, const std::vector<size_t>& members, uint64_t exec_start_ns)
{
  const ModelConfigSpec& spec = model_->spec();
  std::vector<size_t> offsets;
  size_t total = 0;
  for (size_t i : members) {
    offsets.push_back(total);
    total += slots[i].rows;
  }
  size_t exec_rows = 0;
  if (!model_->engine().binding().ExecRows(total, &exec_rows)) {
    TRITONSERVER_Error* err = NPU_GE_ERROR(
        INVALID_ARG, "batch of " << total << " row(s) exceeds what the model can run ("
                                 << model_->engine().binding().max_exec_rows << ")");
    for (size_t i : members) slots[i].Fail(CopyError(err));
    TRITONSERVER_ErrorDelete(err);
    return;
  }
  bool any_gathered = false;
  for (size_t k = 0; k < members.size(); ++k) {
    Slot& slot = slots[members[k]];
    slot.Fail(Gather(slot, offsets[k]));
    any_gathered = any_gathered || slot.error == nullptr;
  }
  if (!any_gathered) return;                         // nothing worth running
  for (size_t i = 0; i < spec.inputs.size(); ++i) {  // padding rows are zeros
    const size_t row = spec.inputs[i].RowBytes();
    std::memset(engine_->InputStaging(i) + total * row, 0, (exec_rows - total) * row);
  }
  uint64_t compute_start = 0, compute_end = 0;
  TRITONSERVER_Error* err = engine_->Run(exec_rows, &compute_start, &compute_end);
  if (err != nullptr) {
    err = WrapError(err, log_prefix_);
    NPU_GE_LOG(ERROR, TRITONSERVER_ErrorMessage(err));
    for (size_t i : members) slots[i].Fail(CopyError(err));
    TRITONSERVER_ErrorDelete(err);
    return;
  }
  size_t answered_rows = 0;  // a failed execution is not counted by Triton
  for (size_t k = 0; k < members.size(); ++k) {
    Slot& slot = slots[members[k]];
    slot.compute_start_ns = compute_start;
    slot.compute_end_ns = compute_end;
    if (slot.error == nullptr) slot.Fail(Scatter(slot, offsets[k]));
    slot.done = slot.error == nullptr;
    if (slot.done) answered_rows += slot.rows;
  }
  if (answered_rows > 0) {
    LogAndDelete(
        TRITONBACKEND_ModelInstanceReportBatchStatistics(
            instance_, answered_rows, exec_start_ns, compute_start, compute_end, NowNs()),
        "cannot report batch statistics");
  }
}

TRITONSERVER_Error*
ModelInstanceState::Gather(const Slot& slot, size_t row_offset)
{
  const ModelConfigSpec& spec = model_->spec();
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const TensorConfig& cfg = spec.inputs[i];
    TRITONBACKEND_Input* input = nullptr;
    NPU_GE_RETURN_IF_ERROR(
        TRITONBACKEND_RequestInput(slot.request, cfg.name.c_str(), &input));
    uint32_t buffers = 0;
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_InputProperties(
        input, nullptr, nullptr, nullptr, nullptr, nullptr, &buffers));
    uint8_t* dst = engine_->InputStaging(i) + row_offset * cfg.RowBytes();
    const size_t expected = slot.rows * cfg.RowBytes();
    size_t copied = 0;
    for (uint32_t b = 0; b < buffers; ++b) {  // Triton may split one tensor
      const void* src = nullptr;
      uint64_t size = 0;
      TRITONSERVER_MemoryType mtype = TRITONSERVER_MEMORY_CPU;
      int64_t mtype_id = 0;
      NPU_GE_RETURN_IF_ERROR(
          TRITONBACKEND_InputBuffer(input, b, &src, &size, &mtype, &mtype_id));
      if (mtype == TRITONSERVER_MEMORY_GPU) {
        return NPU_GE_ERROR(
            UNSUPPORTED,
            "input '" << cfg.name << "' arrived in GPU memory; npu_ge reads host memory");
      }
      if (copied + size > expected) {
        return NPU_GE_ERROR(
            INVALID_ARG,
            "input '" << cfg.name << "': expected " << expected << " bytes, got more");
      }
      std::memcpy(dst + copied, src, size);
      copied += size;
    }
    if (copied != expected) {
      return NPU_GE_ERROR(
          INVALID_ARG, "input '" << cfg.name << "': expected " << expected
                                 << " bytes, got " << copied);
    }
  }
  return nullptr;
}

TRITONSERVER_Error*
ModelInstanceState::Scatter(const Slot& slot, size_t row_offset)
{
  const ModelConfigSpec& spec = model_->spec();
  uint32_t requested_count = 0;
  NPU_GE_RETURN_IF_ERROR(
      TRITONBACKEND_RequestOutputCount(slot.request, &requested_count));
  std::set<std::string> requested;
  for (uint32_t r = 0; r < requested_count; ++r) {
    const char* name = nullptr;
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_RequestOutputName(slot.request, r, &name));
    requested.insert(name);
  }
  for (size_t o = 0; o < spec.outputs.size(); ++o) {
    const TensorConfig& cfg = spec.outputs[o];
    if (!requested.empty() && requested.count(cfg.name) == 0) continue;
    std::vector<int64_t> shape;
    if (spec.max_batch_size > 0) shape.push_back(static_cast<int64_t>(slot.rows));
    shape.insert(shape.end(), cfg.dims.begin(), cfg.dims.end());
    TRITONBACKEND_Output* output = nullptr;
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ResponseOutput(
        slot.response, &output, cfg.name.c_str(), cfg.dtype, shape.data(),
        static_cast<uint32_t>(shape.size())));
    const size_t bytes = slot.rows * cfg.RowBytes();
    void* dst = nullptr;
    TRITONSERVER_MemoryType mtype = TRITONSERVER_MEMORY_CPU;
    int64_t mtype_id = 0;
    NPU_GE_RETURN_IF_ERROR(
        TRITONBACKEND_OutputBuffer(output, &dst, bytes, &mtype, &mtype_id));
    if (mtype == TRITONSERVER_MEMORY_GPU) {
      return NPU_GE_ERROR(
          UNSUPPORTED, "output '" << cfg.name << "': Triton offered GPU memory; "
                                  << "npu_ge writes host memory");
    }
    if (bytes > 0) {
      std::memcpy(dst, engine_->OutputStaging(o) + row_offset * cfg.RowBytes(), bytes);
    }
  }
  return nullptr;
}

void
ModelInstanceState::Finish(std::vector<Slot>& slots, uint64_t exec_start_ns) noexcept
{
  const uint64_t exec_end_ns = NowNs();
  for (Slot& slot : slots) {
    if (slot.response != nullptr) {
      LogAndDelete(
          TRITONBACKEND_ResponseSend(
              slot.response, NPU_GE_RESPONSE_COMPLETE_FINAL, slot.error),
          "cannot send response");
      slot.response = nullptr;  // owned by Triton now
    } else if (slot.error != nullptr) {
      NPU_GE_LOG(
          ERROR, log_prefix_ << ": cannot answer a request: "
                             << TRITONSERVER_ErrorMessage(slot.error));
    }
    const bool ok = slot.error == nullptr;
    const uint64_t cs = ok ? slot.compute_start_ns : exec_start_ns;
    const uint64_t ce = ok ? slot.compute_end_ns : exec_start_ns;
    LogAndDelete(
        TRITONBACKEND_ModelInstanceReportStatistics(
            instance_, slot.request, ok, exec_start_ns, cs, ce, exec_end_ns),
        "cannot report request statistics");
    if (slot.error != nullptr) {
      TRITONSERVER_ErrorDelete(slot.error);
      slot.error = nullptr;
    }
    LogAndDelete(
        TRITONBACKEND_RequestRelease(slot.request, NPU_GE_REQUEST_RELEASE_ALL),
        "cannot release request");
    slot.request = nullptr;
  }
}

}  // namespace npu_ge
