// ModelInstanceState::Execute: gather -> launch -> wait -> scatter for a batch
// formed by Triton's dynamic batcher (model_instance_state.h: when the engine
// has two buffer sets, wait and scatter run on the completion thread). Every
// request gets exactly one response (an error response when anything about it
// failed), statistics are always reported, and every request is released
// exactly once, in Finish().
#include <cstdio>
#include <cstring>
#include <set>

#include "batching.h"
#include "dtype.h"
#include "instance_job.h"
#include "triton_utils.h"

namespace npu_ge {

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
      std::unique_ptr<Job> job(new Job());
      job->exec_start_ns = exec_start_ns;
      // Reserved first: once a request is taken nothing here may throw, or
      // it would be lost with the job instead of answered.
      job->slots.reserve(chunk.second - chunk.first);
      job->offsets.reserve(chunk.second - chunk.first);
      for (size_t k = chunk.first; k < chunk.second; ++k) {
        job->offsets.push_back(job->rows);
        job->rows += slots[live[k]].rows;
        job->slots.push_back(Slot::Take(slots[live[k]]));
      }
      RunJob(*job);
      if (job->launched) HandOver(std::move(job));
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
  // The default scheduler hands cancelled requests over; the dynamic batcher
  // drops them itself. Either way they never reach the NPU.
  FailIfCancelled(slot);
  if (slot.error == nullptr) {
    slot.Fail(ValidateRequest(slot.request, &slot.rows, &slot.gear));
  }
  return slot.error == nullptr;
}

void
ModelInstanceState::FailUnanswered(std::vector<Slot>& slots, const char* what) noexcept
{
  for (Slot& slot : slots) {
    // A slot taken by a job (request moved out) is that job's to answer.
    if (slot.request != nullptr && slot.error == nullptr && !slot.done) {
      char msg[512];  // no allocation on this path
      std::snprintf(
          msg, sizeof(msg), "%s: execution aborted: %s", log_prefix_.c_str(), what);
      slot.Fail(TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, msg));
    }
  }
}

namespace {

// A -1 in the config's dims takes any size (the gears decide).
bool
DimsFit(const std::vector<int64_t>& config_dims, const std::vector<int64_t>& shape)
{
  if (config_dims.size() != shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (config_dims[d] >= 0 && config_dims[d] != shape[d]) return false;
  }
  return true;
}

// "[1,8] and [1,3]" for the message naming a request's input shapes.
std::string
ShapesText(const std::vector<std::vector<int64_t>>& shapes)
{
  std::string text;
  for (size_t i = 0; i < shapes.size(); ++i) {
    text += (i == 0                   ? ""
             : i + 1 == shapes.size() ? " and "
                                      : ", ") +
            DimsToString(shapes[i]);
  }
  return text;
}

}  // namespace

size_t
ModelInstanceState::InputBytes(const Slot& slot, size_t i) const
{
  const TensorConfig& cfg = model_->spec().inputs[i];
  const ShapeGears& gears = model_->engine().binding().shape_gears;
  if (gears.empty()) return slot.rows * cfg.RowBytes();
  const int64_t n = ElementCount(gears.input_dims[slot.gear][i]);
  return static_cast<size_t>(n < 0 ? 0 : n) * DataTypeByteSize(cfg.dtype);
}

TRITONSERVER_Error*
ModelInstanceState::ValidateRequest(
    TRITONBACKEND_Request* request, size_t* rows, size_t* gear)
{
  const ModelConfigSpec& spec = model_->spec();
  const ShapeGears& gears = model_->engine().binding().shape_gears;
  const bool batched = spec.max_batch_size > 0;
  std::vector<std::vector<int64_t>> shapes;  // per config input
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
    if (!gears.empty() ? !DimsFit(cfg.dims, item) : item != cfg.dims) {
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
    shapes.push_back(got);
    // Request dims: a negative or overflowing count is refused, never wrapped.
    const int64_t elements = gears.empty() ? static_cast<int64_t>(r) : ElementCount(got);
    size_t expected = 0;
    if (elements < 0 ||
        __builtin_mul_overflow(
            static_cast<size_t>(elements),
            gears.empty() ? cfg.RowBytes() : DataTypeByteSize(cfg.dtype), &expected)) {
      return NPU_GE_ERROR(
          INVALID_ARG,
          "input '" << cfg.name << "': shape " << DimsToString(got)
                    << " has a negative dimension or more elements than fit in memory");
    }
    if (bytes != expected) {
      return NPU_GE_ERROR(
          INVALID_ARG,
          "input '" << cfg.name << "': expected " << expected << " bytes, got " << bytes);
    }
  }
  if (!gears.empty() && !MatchShapeGear(gears, shapes, gear)) {
    return NPU_GE_ERROR(
        INVALID_ARG, "input shape"
                         << (shapes.size() == 1 ? " " : "s ") << ShapesText(shapes)
                         << " match" << (shapes.size() == 1 ? "es" : "")
                         << " no gear: the model was compiled with " << gears.Describe());
  }
  return nullptr;
}

// Runs one execution. Without a completion thread it is finished here;
// with one, a launched job is handed over by the caller. Never throws: a
// failure answers the job's requests.
void
ModelInstanceState::RunJob(Job& job) noexcept
{
  try {
    const bool launched = Prepare(job);
    if (launched && completer_.joinable()) return;
    if (launched) {
      Complete(job);  // answers and releases the job's requests
      return;
    }
  }
  catch (const std::exception& e) {
    FailUnanswered(job.slots, e.what());
  }
  catch (...) {
    FailUnanswered(job.slots, "unknown exception");
  }
  if (job.launched) {  // an exception after the launch: the work is still owed a wait
    uint64_t end_ns = 0;
    LogAndDelete(engine_->Wait(job.set, &end_ns), "abandoned execution");
    SetDeviceBusy(false);
    job.launched = false;
  }
  if (job.holds_set) ReleaseSet(job.set);
  job.holds_set = false;
  Finish(job.slots, job.exec_start_ns);
}

// Pipelined: the completion thread waits for the launched job and answers it.
void
ModelInstanceState::HandOver(std::unique_ptr<Job> job) noexcept
{
  try {
    std::lock_guard<std::mutex> lock(mu_);
    launched_.push_back(std::move(job));
  }
  catch (...) {  // no memory for the queue: finish it here instead
    if (job != nullptr) Complete(*job);
    return;
  }
  cv_.notify_all();
}

bool
ModelInstanceState::Prepare(Job& job)
{
  const IoBinding& binding = model_->engine().binding();
  if (!binding.ExecRows(job.rows, &job.exec_rows)) {
    job.FailAll(NPU_GE_ERROR(
        INVALID_ARG, "batch of " << job.rows << " row(s) exceeds what the model can run ("
                                 << binding.max_exec_rows << ")"));
    return false;
  }
  job.set = AcquireSet();
  job.holds_set = true;
  // Gear models run one request per execution (max_exec_rows 1), so the
  // job's gear is its request's and a batch never mixes shapes.
  job.shape_gear = job.slots.front().gear;
  while (true) {
    if (engine_->NeedsRecovery()) {
      TRITONSERVER_Error* err = RecoverWhenIdle();
      if (err != nullptr) {
        job.FailAll(WrapError(err, log_prefix_ + ": cannot rebuild the instance"));
        return false;
      }
    }
    // After any recovery: rebuilding the instance resets every set's gear.
    engine_->SelectShapeGear(job.set, job.shape_gear);
    if (!GatherAll(job)) return false;  // nothing worth running
    size_t held = 0;
    for (const Slot& slot : job.slots) held += slot.error == nullptr ? 1 : 0;
    WaitDeviceIdle(held);
    // The previous execution failed meanwhile: recovery replaces the staging
    // just filled, so gather again afterwards.
    if (engine_->NeedsRecovery()) continue;
    // Pipelined, a request may have waited here for a whole execution.
    if (!DropCancelled(job)) return false;
    TRITONSERVER_Error* err =
        engine_->Launch(job.set, job.exec_rows, &job.compute_start_ns);
    if (err != nullptr) {
      err = WrapError(err, log_prefix_);
      NPU_GE_LOG(ERROR, TRITONSERVER_ErrorMessage(err));
      job.FailAll(err);
      NoteHealth();  // a device error of the launch is counted at once
      return false;
    }
    SetDeviceBusy(true);
    job.launched = true;
    return true;
  }
}

bool
ModelInstanceState::DropCancelled(Job& job)
{
  bool any_left = false;
  for (Slot& slot : job.slots) {
    FailIfCancelled(slot);
    any_left = any_left || slot.error == nullptr;
  }
  return any_left;
}

void
ModelInstanceState::FailIfCancelled(Slot& slot)
{
  if (slot.error != nullptr) return;
  bool cancelled = false;
  slot.Fail(TRITONBACKEND_RequestIsCancelled(slot.request, &cancelled));
  if (slot.error == nullptr && cancelled) {
    NPU_GE_LOG(VERBOSE, log_prefix_ << ": request cancelled before execution, not run");
    slot.Fail(NPU_GE_ERROR(CANCELLED, "request cancelled"));
  }
}

bool
ModelInstanceState::GatherAll(Job& job)
{
  const ModelConfigSpec& spec = model_->spec();
  bool any_gathered = false;
  for (size_t k = 0; k < job.slots.size(); ++k) {
    Slot& slot = job.slots[k];
    if (slot.error == nullptr) slot.Fail(Gather(slot, job.offsets[k], job.set));
    any_gathered = any_gathered || slot.error == nullptr;
  }
  const bool padded = model_->engine().binding().shape_gears.empty();
  for (size_t i = 0; i < spec.inputs.size() && padded; ++i) {  // padding rows are zeros
    const size_t row = spec.inputs[i].RowBytes();
    std::memset(
        engine_->SetInputStaging(job.set, i) + job.rows * row, 0,
        (job.exec_rows - job.rows) * row);
  }
  return any_gathered;
}

void
ModelInstanceState::Complete(Job& job) noexcept
{
  TRITONSERVER_Error* err = engine_->Wait(job.set, &job.compute_end_ns);
  job.launched = false;
  SetDeviceBusy(false);  // the next execution may start while this one is answered
  const bool ran = err == nullptr;
  if (!ran) {
    err = WrapError(err, log_prefix_);
    NPU_GE_LOG(ERROR, TRITONSERVER_ErrorMessage(err));
    job.FailAll(err);
    NoteHealth();  // a lost device shows at once, not at the next request
  } else if (const int32_t status = engine_->TakeSyncStatus(job.set)) {
    telemetry_->CountOverflow();
    if (!overflow_logged_.exchange(true)) {
      NPU_GE_LOG(
          WARN, log_prefix_ << ": the stream synchronize returned ACL code " << status
                            << ", an overflow status (CANN logs it as a successful "
                               "synchronize): the requests are answered; counted in "
                               "npu_ge_execution_overflows_total (logged once per "
                               "instance)");
    }
  }
  size_t answered_rows = 0;  // a failed execution is not counted by Triton
  for (size_t k = 0; k < job.slots.size() && ran; ++k) {
    Slot& slot = job.slots[k];
    slot.compute_start_ns = job.compute_start_ns;
    slot.compute_end_ns = job.compute_end_ns;
    if (slot.error == nullptr) slot.Fail(Scatter(slot, job.offsets[k], job.set));
    slot.done = slot.error == nullptr;
    if (slot.done) answered_rows += slot.rows;
  }
  if (answered_rows > 0) {
    LogAndDelete(
        TRITONBACKEND_ModelInstanceReportBatchStatistics(
            instance_, answered_rows, job.exec_start_ns, job.compute_start_ns,
            job.compute_end_ns, NowNs()),
        "cannot report batch statistics");
  }
  ReleaseSet(job.set);
  job.holds_set = false;
  Finish(job.slots, job.exec_start_ns);
}

TRITONSERVER_Error*
ModelInstanceState::Gather(const Slot& slot, size_t row_offset, size_t set)
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
    const size_t expected = InputBytes(slot, i);
    // The request's own bytes per row, not cfg.RowBytes() (0 for -1 dims): an
    // execution's requests share one shape (one gear), so this is every row's.
    uint8_t* dst = engine_->SetInputStaging(set, i) + row_offset * (expected / slot.rows);
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
ModelInstanceState::Scatter(const Slot& slot, size_t row_offset, size_t set)
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
    std::vector<int64_t> shape;  // gear models: the dims this execution produced
    if (!engine_->OutputDims(set, o, &shape)) {
      if (spec.max_batch_size > 0) shape.push_back(static_cast<int64_t>(slot.rows));
      shape.insert(shape.end(), cfg.dims.begin(), cfg.dims.end());
    }
    TRITONBACKEND_Output* output = nullptr;
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ResponseOutput(
        slot.response, &output, cfg.name.c_str(), cfg.dtype, shape.data(),
        static_cast<uint32_t>(shape.size())));
    const int64_t elements = ElementCount(shape);
    const size_t bytes =
        static_cast<size_t>(elements < 0 ? 0 : elements) * DataTypeByteSize(cfg.dtype);
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
    if (bytes > 0) {  // at the request's own bytes per row, as in Gather
      std::memcpy(
          dst, engine_->SetOutputStaging(set, o) + row_offset * (bytes / slot.rows),
          bytes);
    }
  }
  return nullptr;
}

void
ModelInstanceState::Finish(std::vector<Slot>& slots, uint64_t exec_start_ns) noexcept
{
  const uint64_t exec_end_ns = NowNs();
  for (Slot& slot : slots) {
    if (slot.request == nullptr) continue;  // taken by an execution (Job)
    // Statistics first: a client that reads /stats right after its response
    // then sees its request counted (Triton updates them synchronously).
    const bool ok = slot.error == nullptr;
    const uint64_t cs = ok ? slot.compute_start_ns : exec_start_ns;
    const uint64_t ce = ok ? slot.compute_end_ns : exec_start_ns;
    LogAndDelete(
        TRITONBACKEND_ModelInstanceReportStatistics(
            instance_, slot.request, ok, exec_start_ns, cs, ce, exec_end_ns),
        "cannot report request statistics");
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
