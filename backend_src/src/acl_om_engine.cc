#include "acl_om_engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "acl_recovery.h"
#include "batching.h"
#include "device_errors.h"
#include "dtype.h"

namespace npu_ge {

namespace {

ModelTensorDesc
MakeTensorDesc(const char* name, const aclmdlIODims& dims, aclDataType dtype, size_t size)
{
  ModelTensorDesc t;
  t.name = name == nullptr ? "" : name;
  for (size_t d = 0; d < dims.dimCount && d < ACL_MAX_DIM_CNT; ++d) {
    t.dims.push_back(dims.dims[d]);
  }
  t.dtype_known = AclToTritonDataType(dtype, &t.dtype);
  t.dtype_name = AclDataTypeName(dtype);
  t.byte_size = size;
  return t;
}

// Input `i`'s description. Its dims come from aclmdlGetInputDimsV2 where the
// runtime has it: CANN documents that for a static-AIPP input (YUV420SP n,
// h*1.5,w,1; YUV422SP n,h*2,w,1; ...) only V2's dims multiply out to
// aclmdlGetInputSizeByIndex, while aclmdlGetInputDims gives the image's. With
// aclmdlGetInputDims only, dims larger than the size fail the load naming the
// missing call (a larger size is left to the staging check, as before).
TRITONSERVER_Error*
ReadInputDesc(
    const AclRuntime& rt, aclmdlDesc* desc, size_t i, const char* name,
    ModelTensorDesc* t)
{
  aclmdlIODims dims{};
  const bool v2 = rt.aclmdlGetInputDimsV2 != nullptr;
  if (v2) {
    NPU_GE_RETURN_IF_ACL_ERROR(rt, aclmdlGetInputDimsV2(desc, i, &dims));
  } else {
    NPU_GE_RETURN_IF_ACL_ERROR(rt, aclmdlGetInputDims(desc, i, &dims));
  }
  *t = MakeTensorDesc(
      name, dims, rt.aclmdlGetInputDataType(desc, i),
      rt.aclmdlGetInputSizeByIndex(desc, i));
  const int64_t n = ElementCount(t->dims);
  if (v2 || n < 0 || !t->dtype_known) return nullptr;  // -1: sized by the largest gear
  const size_t bytes = static_cast<size_t>(n) * DataTypeByteSize(t->dtype);
  if (bytes <= t->byte_size) return nullptr;
  return NPU_GE_ERROR(
      UNSUPPORTED,
      "input '" << t->name << "': aclmdlGetInputDims describes it as "
                << DimsToString(t->dims) << " " << DataTypeName(t->dtype) << " (" << bytes
                << " bytes), but aclmdlGetInputSizeByIndex "
                << "says " << t->byte_size
                << " bytes: a static-AIPP input (YUV420SP, YUV422SP, ...) is "
                   "described by its real layout only through "
                   "aclmdlGetInputDimsV2 (documented in CANN 6.0.1 and later), "
                   "which this libascendcl.so does not export");
}

// A gear model cannot be served (nor its gears listed) without these; their
// absence fails the load naming the call instead of failing every request.
TRITONSERVER_Error*
RequireGearCall(bool present, const char* name, const std::string& gears)
{
  if (present) return nullptr;
  return NPU_GE_ERROR(
      UNSUPPORTED, "compiled with " << gears << ", which need " << name
                                    << " (documented in CANN 6.0.1 and later); this "
                                    << "libascendcl.so does not export it");
}

// {H, W} per image size gear; empty when the model has none or this
// runtime cannot list them.
TRITONSERVER_Error*
ImageSizeGears(
    const AclRuntime& rt, const aclmdlDesc* desc, std::vector<std::vector<int64_t>>* out)
{
  if (rt.aclmdlGetDynamicHW == nullptr) return nullptr;
  aclmdlHW hw{};
  NPU_GE_RETURN_IF_ACL_ERROR(rt, aclmdlGetDynamicHW(desc, static_cast<size_t>(-1), &hw));
  for (size_t g = 0; g < hw.hwCount && g < ACL_MAX_HW_NUM; ++g) {
    out->push_back(
        {static_cast<int64_t>(hw.hw[g][0]), static_cast<int64_t>(hw.hw[g][1])});
  }
  return nullptr;
}

// The dims of all inputs, concatenated, per dims gear; empty when the model
// has none or this runtime cannot list them.
TRITONSERVER_Error*
DimsGears(
    const AclRuntime& rt, const aclmdlDesc* desc, std::vector<std::vector<int64_t>>* out)
{
  size_t count = 0;
  if (rt.aclmdlGetInputDynamicGearCount == nullptr ||
      rt.aclmdlGetInputDynamicDims == nullptr) {
    return nullptr;
  }
  NPU_GE_RETURN_IF_ACL_ERROR(
      rt, aclmdlGetInputDynamicGearCount(desc, static_cast<size_t>(-1), &count));
  if (count == 0) return nullptr;
  std::vector<aclmdlIODims> gears(count);
  NPU_GE_RETURN_IF_ACL_ERROR(
      rt, aclmdlGetInputDynamicDims(desc, static_cast<size_t>(-1), gears.data(), count));
  for (const aclmdlIODims& g : gears) {
    out->emplace_back(g.dims, g.dims + std::min<size_t>(g.dimCount, ACL_MAX_DIM_CNT));
  }
  return nullptr;
}

// No gears could be read: names the listing calls this runtime lacks.
TRITONSERVER_Error*
NoGearsRead(const AclRuntime& rt)
{
  const std::string kind = "dims or image size gears";
  NPU_GE_RETURN_IF_ERROR(
      RequireGearCall(rt.aclmdlGetDynamicHW != nullptr, "aclmdlGetDynamicHW", kind));
  NPU_GE_RETURN_IF_ERROR(RequireGearCall(
      rt.aclmdlGetInputDynamicGearCount != nullptr, "aclmdlGetInputDynamicGearCount",
      kind));
  NPU_GE_RETURN_IF_ERROR(RequireGearCall(
      rt.aclmdlGetInputDynamicDims != nullptr, "aclmdlGetInputDynamicDims", kind));
  return NPU_GE_ERROR(
      UNSUPPORTED, "has the dynamic-shape input " << ACL_DYNAMIC_TENSOR_NAME
                                                  << " but neither batch, dims nor image "
                                                  << "size gears");
}

// Checks the calls serving needs are there (the model's gear kind decides).
TRITONSERVER_Error*
RequireServingCalls(const AclRuntime& rt, const ShapeGears& gears)
{
  const bool image = gears.kind == ShapeGearKind::kImageSize;
  const std::string kind = gears.Describe();
  if (image) {
    NPU_GE_RETURN_IF_ERROR(RequireGearCall(
        rt.aclmdlSetDynamicHWSize != nullptr, "aclmdlSetDynamicHWSize", kind));
  } else {
    NPU_GE_RETURN_IF_ERROR(RequireGearCall(
        rt.aclmdlSetInputDynamicDims != nullptr, "aclmdlSetInputDynamicDims", kind));
  }
  NPU_GE_RETURN_IF_ERROR(RequireGearCall(
      rt.aclmdlGetInputIndexByName != nullptr, "aclmdlGetInputIndexByName", kind));
  return RequireGearCall(
      rt.aclmdlGetCurOutputDims != nullptr, "aclmdlGetCurOutputDims", kind);
}

// A model with the dynamic-shape input but no batch gears was compiled with
// image size or dims gears: reads them into io->shape_gears.
TRITONSERVER_Error*
ReadShapeGears(const AclRuntime& rt, const aclmdlDesc* desc, ModelIoDesc* io)
{
  std::vector<std::vector<int64_t>> values;
  ShapeGearKind kind = ShapeGearKind::kImageSize;
  NPU_GE_RETURN_IF_ERROR(ImageSizeGears(rt, desc, &values));
  if (values.empty()) {
    kind = ShapeGearKind::kDims;
    NPU_GE_RETURN_IF_ERROR(DimsGears(rt, desc, &values));
  }
  if (values.empty()) return NoGearsRead(rt);
  NPU_GE_RETURN_IF_ERROR(ApplyShapeGears(kind, values, io));
  return RequireServingCalls(rt, io->shape_gears);
}

}  // namespace

TRITONSERVER_Error*
ReadOmDescription(const AclRuntime& rt, aclmdlDesc* desc, ModelIoDesc* io)
{
  ModelIoDesc out;
  const size_t n_in = rt.aclmdlGetNumInputs(desc);
  for (size_t i = 0; i < n_in; ++i) {
    const char* name = rt.aclmdlGetInputNameByIndex(desc, i);
    if (name != nullptr && std::strcmp(name, ACL_DYNAMIC_TENSOR_NAME) == 0) {
      out.has_dynamic_batch_input = true;
      out.dynamic_batch_input_index = i;
      out.dynamic_batch_input_size = rt.aclmdlGetInputSizeByIndex(desc, i);
      continue;
    }
    ModelTensorDesc t;
    NPU_GE_RETURN_IF_ERROR(ReadInputDesc(rt, desc, i, name, &t));
    out.inputs.push_back(std::move(t));
    out.input_model_index.push_back(i);
  }
  const size_t n_out = rt.aclmdlGetNumOutputs(desc);
  for (size_t i = 0; i < n_out; ++i) {
    aclmdlIODims dims{};
    NPU_GE_RETURN_IF_ACL_ERROR(rt, aclmdlGetOutputDims(desc, i, &dims));
    out.outputs.push_back(MakeTensorDesc(
        rt.aclmdlGetOutputNameByIndex(desc, i), dims, rt.aclmdlGetOutputDataType(desc, i),
        rt.aclmdlGetOutputSizeByIndex(desc, i)));
  }
  if (out.has_dynamic_batch_input) {
    aclmdlBatch batch{};
    NPU_GE_RETURN_IF_ACL_ERROR(rt, aclmdlGetDynamicBatch(desc, &batch));
    for (size_t g = 0; g < batch.batchCount && g < ACL_MAX_BATCH_NUM; ++g) {
      out.gears.push_back(static_cast<int64_t>(batch.batch[g]));
    }
    if (out.gears.empty()) NPU_GE_RETURN_IF_ERROR(ReadShapeGears(rt, desc, &out));
  }
  *io = std::move(out);
  return nullptr;
}

namespace {

// The host path: staging is pinned when the runtime has aclrtMallocHost (then
// copies are aclrtMemcpyAsync on the instance's stream, queued with the
// execution), else pageable (synchronous aclrtMemcpy around the execution).
// The stream is waited for with aclrtSynchronizeStreamWithTimeout and the
// model's execute_timeout_ms where the runtime has it. Any failure marks the
// instance broken; Recover stops the stream and rebuilds all of its device
// state, parking what an unstoppable execution may still touch
// (acl_recovery.h).
class AclOmInstance : public EngineInstance {
 public:
  AclOmInstance(
      std::shared_ptr<AclRuntime> rt, const ModelConfigSpec& spec, const ModelIoDesc& io,
      const IoBinding& binding, int32_t device, const std::string& path)
      : rt_(std::move(rt)),
        spec_(spec),
        io_(io),
        binding_(binding),
        device_id_(device),
        path_(path)
  {
  }
  ~AclOmInstance() override { ReleaseParked(); }

  // Builds the instance's device state; with `adopt`, on the device reference,
  // context and model DescribeOmModel loaded (no second copy of the weights).
  TRITONSERVER_Error* Init(PreloadedOm* adopt = nullptr);

  uint8_t* InputStaging(size_t i) override { return SetInputStaging(0, i); }
  const uint8_t* OutputStaging(size_t i) const override { return SetOutputStaging(0, i); }
  TRITONSERVER_Error* Run(
      size_t exec_rows, uint64_t* compute_start_ns, uint64_t* compute_end_ns) override;
  size_t DeviceBytes() const override { return device_bytes_; }

  size_t BufferSets() const override { return sets_.size(); }
  uint8_t* SetInputStaging(size_t set, size_t i) override
  {
    return sets_[set].in_host[i].data();
  }
  const uint8_t* SetOutputStaging(size_t set, size_t i) const override
  {
    return sets_[set].out_host[i].data();
  }
  TRITONSERVER_Error* Launch(
      size_t set, size_t exec_rows, uint64_t* compute_start_ns) override;
  TRITONSERVER_Error* Wait(size_t set, uint64_t* compute_end_ns) override;
  bool NeedsRecovery() const override { return broken_.load(); }
  int32_t TakeSyncStatus(size_t set) override
  {
    const int32_t code = sync_status_[set];
    sync_status_[set] = 0;
    return code;
  }
  TRITONSERVER_Error* Recover() override;
  std::string OutOfService() const override;
  bool DeviceLost() const override { return device_lost_.load(); }
  std::vector<int32_t> TakeDeviceErrors() override
  {
    std::lock_guard<std::mutex> lock(device_errors_mu_);
    return std::exchange(device_errors_, {});
  }
  size_t ParkedExecutions() const override { return parked_.size(); }
  size_t ReleaseParked() override;
  void SelectShapeGear(size_t set, size_t gear) override { gear_[set] = gear; }
  bool OutputDims(size_t set, size_t o, std::vector<int64_t>* dims) const override;

 private:
  bool has_shape_gears() const { return !binding_.shape_gears.empty(); }
  TRITONSERVER_Error* InitShapeGears();
  size_t InputBytes(size_t set, size_t config_input, size_t exec_rows) const;
  size_t OutputBytes(size_t set, size_t config_output) const;
  TRITONSERVER_Error* SetShapeGear(size_t set);
  TRITONSERVER_Error* ReadOutputDims(size_t set);
  TRITONSERVER_Error* AllocateSet(BufferSet* set, size_t* device_bytes);
  TRITONSERVER_Error* AllocateStaging(BufferSet* set);
  TRITONSERVER_Error* CopyInputs(size_t set, size_t exec_rows);
  TRITONSERVER_Error* CopyOutputs(size_t set, bool queue);
  // `status`: an overflow-type code the wait returned (not a failure), else 0.
  TRITONSERVER_Error* Synchronize(int32_t* status);
  TRITONSERVER_Error* SyncFailed(aclError rc, TRITONSERVER_Error* err);
  // Records a failed launch's or wait's code when it is a device-class error
  // (device_errors.h), and a lost device.
  void NoteFailure(aclError rc);
  // The bound of the last wait for a timed-out stream nothing can stop.
  int32_t LastWaitMs() const
  {
    return static_cast<int32_t>(std::min<int64_t>(spec_.execute_timeout_ms, 1000));
  }
  // Releases every device resource, or parks them when work may still use
  // them (acl_recovery.h).
  void Teardown();
  // StopFailedStream when a failed wait or launch left work on the stream.
  StreamStop StopStream();
  void FreeAll();  // the stream first (idle), then buffers, model, context
  void Park();     // moves every resource into parked_
  // Marks the instance broken when `err` is an error; returns `err`. Work may
  // have been queued before the failing call: the stream is stopped first.
  TRITONSERVER_Error* Broken(TRITONSERVER_Error* err)
  {
    if (err != nullptr) {
      stream_busy_ = true;
      broken_ = true;
    }
    return err;
  }

  // Declaration order is release order reversed (Teardown makes it explicit).
  std::shared_ptr<AclRuntime> rt_;
  const ModelConfigSpec& spec_;
  const ModelIoDesc& io_;
  const IoBinding& binding_;
  const int32_t device_id_;
  const std::string path_;
  bool pinned_ = false;  // staging from aclrtMallocHost, copies queued
  DeviceRef device_;
  ContextOwner ctx_;
  StreamOwner stream_;
  LoadedModel model_;
  ModelDesc desc_;               // of model_, for aclmdlGetCurOutputDims (gear models)
  size_t dynamic_index_ = 0;     // of ACL_DYNAMIC_TENSOR_NAME (aclmdlGetInputIndexByName)
  std::vector<BufferSet> sets_;  // 2 with copy_overlap, else 1
  std::vector<size_t> exec_rows_;     // per set, of its launched execution
  std::vector<int32_t> sync_status_;  // per set: status code of its last wait
  std::vector<size_t> gear_;          // per set: shape gear of its next/last execution
  // Per set, per model output: dims of its launched execution (gear models).
  std::vector<std::vector<std::vector<int64_t>>> out_dims_;
  size_t device_bytes_ = 0;
  std::atomic<bool> broken_{false};
  // A wait or a launch failed: the stream may still hold unfinished work.
  std::atomic<bool> stream_busy_{false};
  // A wait failed with a device-lost code (IsDeviceLostCode): never rebuilt.
  std::atomic<bool> device_lost_{false};
  aclError lost_code_ = ACL_SUCCESS;
  std::mutex device_errors_mu_;
  std::vector<int32_t> device_errors_;  // not yet taken (TakeDeviceErrors)
  mutable std::mutex out_of_service_mu_;
  std::string out_of_service_;  // not empty: every Recover fails with it
  // Executions abandoned to a force-destroyed (or unstoppable) stream, with
  // everything they may touch; released by ReleaseParked at finalize.
  std::vector<std::unique_ptr<ParkedExecution>> parked_;
};

TRITONSERVER_Error*
AclOmInstance::Init(PreloadedOm* adopt)
{
  pinned_ = rt_->has_pinned_host_memory();
  if (adopt != nullptr) {  // all three at once: Teardown releases them together
    device_ = std::move(adopt->device_ref);
    ctx_ = std::move(adopt->ctx);
    model_ = std::move(adopt->model);
  } else {
    NPU_GE_RETURN_IF_ERROR(DeviceRef::Acquire(rt_.get(), device_id_, &device_));
    NPU_GE_RETURN_IF_ERROR(ContextOwner::Create(rt_.get(), device_id_, &ctx_));
  }
  NPU_GE_RETURN_IF_ERROR(ctx_.MakeCurrent());
  NPU_GE_RETURN_IF_ERROR(StreamOwner::Create(rt_.get(), &stream_));
  if (!model_.held())
    NPU_GE_RETURN_IF_ERROR(LoadedModel::Load(rt_.get(), path_, &model_));
  size_t bytes = 0, work = 0, weight = 0;
  if (rt_->aclmdlQuerySize != nullptr &&
      rt_->aclmdlQuerySize(path_.c_str(), &work, &weight) == ACL_SUCCESS) {
    bytes += work + weight;
  }
  sets_.resize(spec_.copy_overlap ? 2 : 1);
  exec_rows_.assign(sets_.size(), 0);
  sync_status_.assign(sets_.size(), 0);
  gear_.assign(sets_.size(), 0);
  out_dims_.assign(sets_.size(), {});
  if (has_shape_gears()) NPU_GE_RETURN_IF_ERROR(InitShapeGears());
  for (BufferSet& set : sets_) NPU_GE_RETURN_IF_ERROR(AllocateSet(&set, &bytes));
  device_bytes_ = bytes;
  return nullptr;
}

void
AclOmInstance::Teardown()
{
  if (ctx_.get() != nullptr) {
    LogAndDelete(ctx_.MakeCurrent(), "cannot select the instance context");
  }
  const StreamStop stop = StopStream();
  // After a lost device nothing is freed: the device cannot confirm that
  // nothing touches the memory any more (ReleaseParked asks it at unload).
  if (stop == StreamStop::kIdle && !device_lost_.load()) {
    FreeAll();
    return;
  }
  if (ctx_.get() == nullptr && sets_.empty()) return;  // nothing was allocated
  Park();
  std::string why;
  if (stop == StreamStop::kRunning) {
    const std::string calls =
        rt_->can_stop_streams()
            ? "aclrtStreamAbort and aclrtDestroyStreamForce both failed to stop it "
              "(logged)"
            : "this libascendcl.so exports neither aclrtStreamAbort nor "
              "aclrtDestroyStreamForce to stop it";
    why = NPU_GE_MSG(
        "an execution on device "
        << device_id_
        << " did not finish within execute_timeout_ms=" << spec_.execute_timeout_ms
        << " ms nor " << LastWaitMs() << " ms later, and " << calls
        << " (aclrtDestroyStream would wait for it for ever): the instance leaves its "
           "stream, buffers and model allocated and serves no more requests; reload the "
           "model, and reset the device or restart the server once it recovers (CANN 7.0 "
           "and later have aclrtDestroyStreamForce)");
  } else if (parked_.size() > kMaxParkedExecutions) {
    why = NPU_GE_MSG(
        parked_.size() << " executions on device " << device_id_
                       << " were abandoned to streams destroyed by force, each holding "
                          "a copy of the model and its buffers until the model is "
                          "unloaded: the instance serves no more requests; reload the "
                          "model");
  }
  if (!why.empty()) {
    NPU_GE_LOG(ERROR, path_ << ": " << why);
    std::lock_guard<std::mutex> lock(out_of_service_mu_);
    out_of_service_ = why;
  }
}

void
AclOmInstance::FreeAll()
{
  stream_.Reset();  // idle (or aborted): nothing left on it to wait for
  sets_.clear();
  desc_.Reset();
  model_.Reset();
  ctx_.Reset();
  device_.Reset();
}

void
AclOmInstance::Park()
{
  std::unique_ptr<ParkedExecution> p(new ParkedExecution());
  p->sets = std::move(sets_);
  p->desc = std::move(desc_);
  p->model = std::move(model_);
  p->stream = std::move(stream_);
  p->ctx = std::move(ctx_);
  p->device = std::move(device_);
  sets_.clear();
  parked_.push_back(std::move(p));
  NPU_GE_LOG(
      WARN, path_ << " device " << device_id_
                  << ": parked the abandoned execution's buffers, staging, model and "
                     "context until the model is unloaded ("
                  << parked_.size() << " parked); rebuilding with fresh ones");
}

StreamStop
AclOmInstance::StopStream()
{
  if (stream_.get() == nullptr || !stream_busy_.load()) return StreamStop::kIdle;
  stream_busy_ = false;
  return StopFailedStream(
      *rt_, &stream_, LastWaitMs(), NPU_GE_MSG(path_ << " device " << device_id_));
}

std::string
AclOmInstance::OutOfService() const
{
  std::lock_guard<std::mutex> lock(out_of_service_mu_);
  return out_of_service_;
}

TRITONSERVER_Error*
AclOmInstance::Recover()
{
  if (OutOfService().empty()) Teardown();
  if (device_lost_.load() && OutOfService().empty()) {
    const std::string why = NPU_GE_MSG(
        "device " << device_id_ << " reported ACL error " << lost_code_
                  << ", a device-lost class of error: the instance is broken and serves "
                     "no more requests (Triton releases that ask backends report its "
                     "model not ready); its resources stay parked until the model is "
                     "unloaded; check the NPU (npu-smi), then reload the model or "
                     "restart the server");
    NPU_GE_LOG(ERROR, path_ << ": " << why);
    std::lock_guard<std::mutex> lock(out_of_service_mu_);
    out_of_service_ = why;
  }
  const std::string why = OutOfService();
  if (!why.empty()) return NPU_GE_ERROR(UNAVAILABLE, why);
  NPU_GE_RETURN_IF_ERROR(Init());
  broken_ = false;
  return nullptr;
}

size_t
AclOmInstance::ReleaseParked()
{
  if (OutOfService().empty() || ctx_.get() != nullptr || !sets_.empty()) Teardown();
  if (parked_.empty()) return 0;
  return npu_ge::ReleaseParked(
      *rt_, &parked_, LastWaitMs(), NPU_GE_MSG(path_ << " device " << device_id_));
}

TRITONSERVER_Error*
AclOmInstance::AllocateSet(BufferSet* set, size_t* device_bytes)
{
  const size_t n_in = io_.inputs.size() + (io_.has_dynamic_batch_input ? 1 : 0);
  std::vector<size_t> in_sizes(n_in, io_.dynamic_batch_input_size);
  for (size_t k = 0; k < io_.inputs.size(); ++k) {
    in_sizes[io_.input_model_index[k]] = io_.inputs[k].byte_size;
  }
  NPU_GE_RETURN_IF_ERROR(Dataset::Create(rt_.get(), &set->in_ds));
  NPU_GE_RETURN_IF_ERROR(Dataset::Create(rt_.get(), &set->out_ds));
  set->in_dev.resize(n_in);
  for (size_t m = 0; m < n_in; ++m) {
    NPU_GE_RETURN_IF_ERROR(
        DeviceBuffer::Allocate(rt_.get(), in_sizes[m], &set->in_dev[m]));
    NPU_GE_RETURN_IF_ERROR(set->in_ds.AddBuffer(set->in_dev[m].get(), in_sizes[m]));
    *device_bytes += in_sizes[m];
  }
  set->out_dev.resize(io_.outputs.size());
  for (size_t m = 0; m < io_.outputs.size(); ++m) {
    const size_t size = io_.outputs[m].byte_size;
    NPU_GE_RETURN_IF_ERROR(DeviceBuffer::Allocate(rt_.get(), size, &set->out_dev[m]));
    NPU_GE_RETURN_IF_ERROR(set->out_ds.AddBuffer(set->out_dev[m].get(), size));
    *device_bytes += size;
  }
  return AllocateStaging(set);
}

TRITONSERVER_Error*
AclOmInstance::AllocateStaging(BufferSet* set)
{
  auto staging = [&](const TensorConfig& cfg, const ModelTensorDesc& model,
                     const char* what, HostBuffer* host) -> TRITONSERVER_Error* {
    // A gear model's tensors are as large as the model's largest gear.
    const size_t need =
        has_shape_gears() ? model.byte_size : cfg.RowBytes() * binding_.max_exec_rows;
    if (model.byte_size < need) {
      return NPU_GE_ERROR(
          INVALID_ARG, what << " '" << cfg.name << "': expected the model to hold "
                            << need << " bytes for " << binding_.max_exec_rows
                            << " row(s), got " << model.byte_size);
    }
    return HostBuffer::Allocate(rt_.get(), need, pinned_, host);
  };
  set->in_host.resize(spec_.inputs.size());
  for (size_t i = 0; i < spec_.inputs.size(); ++i) {
    NPU_GE_RETURN_IF_ERROR(staging(
        spec_.inputs[i], io_.inputs[binding_.input_index[i]], "input", &set->in_host[i]));
  }
  set->out_host.resize(spec_.outputs.size());
  for (size_t i = 0; i < spec_.outputs.size(); ++i) {
    NPU_GE_RETURN_IF_ERROR(staging(
        spec_.outputs[i], io_.outputs[binding_.output_index[i]], "output",
        &set->out_host[i]));
  }
  return nullptr;
}

TRITONSERVER_Error*
AclOmInstance::CopyInputs(size_t s, size_t exec_rows)
{
  const BufferSet& set = sets_[s];
  for (size_t i = 0; i < spec_.inputs.size(); ++i) {
    const size_t m = io_.input_model_index[binding_.input_index[i]];
    const DeviceBuffer& dev = set.in_dev[m];
    const size_t bytes = InputBytes(s, i, exec_rows);
    const void* host = set.in_host[i].data();
    if (pinned_) {
      NPU_GE_RETURN_IF_ACL_ERROR(
          *rt_, aclrtMemcpyAsync(
                    dev.get(), dev.size(), host, bytes, ACL_MEMCPY_HOST_TO_DEVICE,
                    stream_.get()));
    } else {
      NPU_GE_RETURN_IF_ACL_ERROR(
          *rt_,
          aclrtMemcpy(dev.get(), dev.size(), host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    }
  }
  return nullptr;
}

// queue: on the stream with aclrtMemcpyAsync (pinned staging, before the
// sync); otherwise synchronous aclrtMemcpy (pageable staging, after it).
TRITONSERVER_Error*
AclOmInstance::CopyOutputs(size_t s, bool queue)
{
  BufferSet& set = sets_[s];
  for (size_t i = 0; i < spec_.outputs.size(); ++i) {
    const DeviceBuffer& dev = set.out_dev[binding_.output_index[i]];
    HostBuffer& host = set.out_host[i];
    const size_t bytes = OutputBytes(s, i);
    if (queue) {
      NPU_GE_RETURN_IF_ACL_ERROR(
          *rt_, aclrtMemcpyAsync(
                    host.data(), host.size(), dev.get(), bytes, ACL_MEMCPY_DEVICE_TO_HOST,
                    stream_.get()));
    } else {
      NPU_GE_RETURN_IF_ACL_ERROR(
          *rt_,
          aclrtMemcpy(
              host.data(), host.size(), dev.get(), bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    }
  }
  return nullptr;
}

TRITONSERVER_Error*
AclOmInstance::InitShapeGears()
{
  NPU_GE_RETURN_IF_ERROR(ModelDesc::FromModel(rt_.get(), model_, &desc_));
  // CANN documents this lookup for the index the set calls take.
  NPU_GE_RETURN_IF_ACL_ERROR(
      *rt_,
      aclmdlGetInputIndexByName(desc_.get(), ACL_DYNAMIC_TENSOR_NAME, &dynamic_index_));
  return nullptr;
}

size_t
AclOmInstance::InputBytes(size_t s, size_t i, size_t exec_rows) const
{
  const TensorConfig& cfg = spec_.inputs[i];
  if (!has_shape_gears()) return exec_rows * cfg.RowBytes();
  const int64_t n = ElementCount(binding_.shape_gears.input_dims[gear_[s]][i]);
  return static_cast<size_t>(n < 0 ? 0 : n) * DataTypeByteSize(cfg.dtype);
}

size_t
AclOmInstance::OutputBytes(size_t s, size_t i) const
{
  const TensorConfig& cfg = spec_.outputs[i];
  if (!has_shape_gears()) return exec_rows_[s] * cfg.RowBytes();
  const int64_t n = ElementCount(out_dims_[s][binding_.output_index[i]]);
  return static_cast<size_t>(n < 0 ? 0 : n) * DataTypeByteSize(cfg.dtype);
}

// Tells CANN the set's gear: all inputs' dims concatenated for dims gears,
// H and W for image size gears.
TRITONSERVER_Error*
AclOmInstance::SetShapeGear(size_t s)
{
  const std::vector<int64_t>& values = binding_.shape_gears.values[gear_[s]];
  aclmdlDataset* ds = sets_[s].in_ds.get();
  if (binding_.shape_gears.kind == ShapeGearKind::kImageSize) {
    return AclCall(
        *rt_, "aclmdlSetDynamicHWSize",
        rt_->aclmdlSetDynamicHWSize(
            model_.id(), ds, dynamic_index_, static_cast<uint64_t>(values[0]),
            static_cast<uint64_t>(values[1])));
  }
  aclmdlIODims dims{};
  dims.dimCount = std::min<size_t>(values.size(), ACL_MAX_DIM_CNT);
  std::copy(values.begin(), values.begin() + dims.dimCount, dims.dims);
  return AclCall(
      *rt_, "aclmdlSetInputDynamicDims",
      rt_->aclmdlSetInputDynamicDims(model_.id(), ds, dynamic_index_, &dims));
}

TRITONSERVER_Error*
AclOmInstance::ReadOutputDims(size_t s)
{
  std::vector<std::vector<int64_t>>& dims = out_dims_[s];
  dims.assign(io_.outputs.size(), {});
  for (size_t m = 0; m < io_.outputs.size(); ++m) {
    aclmdlIODims cur{};
    NPU_GE_RETURN_IF_ACL_ERROR(*rt_, aclmdlGetCurOutputDims(desc_.get(), m, &cur));
    dims[m].assign(cur.dims, cur.dims + std::min<size_t>(cur.dimCount, ACL_MAX_DIM_CNT));
    const size_t bytes =
        static_cast<size_t>(std::max<int64_t>(ElementCount(dims[m]), 0)) *
        DataTypeByteSize(io_.outputs[m].dtype);
    if (ElementCount(dims[m]) < 0 || bytes > sets_[s].out_dev[m].size()) {
      return NPU_GE_ERROR(
          INTERNAL, "aclmdlGetCurOutputDims reported dims "
                        << DimsToString(dims[m]) << " for output '" << io_.outputs[m].name
                        << "', more than its buffer holds");
    }
  }
  return nullptr;
}

bool
AclOmInstance::OutputDims(size_t s, size_t o, std::vector<int64_t>* dims) const
{
  if (!has_shape_gears()) return false;
  *dims = out_dims_[s][binding_.output_index[o]];
  return true;
}

TRITONSERVER_Error*
AclOmInstance::Launch(size_t s, size_t exec_rows, uint64_t* compute_start_ns)
{
  BufferSet& set = sets_[s];
  exec_rows_[s] = exec_rows;
  NPU_GE_RETURN_IF_ERROR(ctx_.MakeCurrent());
  if (!pinned_) NPU_GE_RETURN_IF_ERROR(Broken(CopyInputs(s, exec_rows)));
  *compute_start_ns = NowNs();  // with pinned staging, the copy-in is device work
  if (pinned_) NPU_GE_RETURN_IF_ERROR(Broken(CopyInputs(s, exec_rows)));
  if (has_shape_gears()) NPU_GE_RETURN_IF_ERROR(Broken(SetShapeGear(s)));
  if (!binding_.gears.empty()) {
    NPU_GE_RETURN_IF_ERROR(Broken(AclCall(
        *rt_, "aclmdlSetDynamicBatchSize",
        rt_->aclmdlSetDynamicBatchSize(
            model_.id(), set.in_ds.get(), io_.dynamic_batch_input_index, exec_rows))));
  }
  const aclError exec_rc = rt_->aclmdlExecuteAsync(
      model_.id(), set.in_ds.get(), set.out_ds.get(), stream_.get());
  if (exec_rc != ACL_SUCCESS) NoteFailure(exec_rc);
  NPU_GE_RETURN_IF_ERROR(Broken(AclCall(*rt_, "aclmdlExecuteAsync", exec_rc)));
  // Read now, not after the wait: the dynamic info is the model's, and the
  // other set's Launch may set another gear before this execution is waited for.
  if (has_shape_gears()) NPU_GE_RETURN_IF_ERROR(Broken(ReadOutputDims(s)));
  if (pinned_) NPU_GE_RETURN_IF_ERROR(Broken(CopyOutputs(s, true)));
  return nullptr;
}

// Waits for everything queued on the stream. Errors of queued work surface
// here, not at the call that queued it.
TRITONSERVER_Error*
AclOmInstance::Synchronize(int32_t* status)
{
  *status = 0;
  if (rt_->aclrtSynchronizeStreamWithTimeout == nullptr) {  // older CANN: unbounded
    const aclError rc = rt_->aclrtSynchronizeStream(stream_.get());
    if (rc == ACL_SUCCESS) return nullptr;
    if (IsStatusSyncCode(rc)) {
      *status = rc;
      rt_->RecentErrorMessage();  // consumed with its status
      return nullptr;
    }
    return SyncFailed(rc, AclError(*rt_, "aclrtSynchronizeStream", rc));
  }
  const int32_t timeout_ms = static_cast<int32_t>(
      std::min<int64_t>(spec_.execute_timeout_ms, std::numeric_limits<int32_t>::max()));
  const aclError rc = rt_->aclrtSynchronizeStreamWithTimeout(stream_.get(), timeout_ms);
  if (rc == ACL_SUCCESS) return nullptr;
  if (IsStatusSyncCode(rc)) {
    *status = rc;
    rt_->RecentErrorMessage();  // consumed with its status
    return nullptr;
  }
  TRITONSERVER_Error* err = AclError(*rt_, "aclrtSynchronizeStreamWithTimeout", rc);
  return SyncFailed(rc, err);
}

// Every failed wait leaves the stream to Teardown's abort / force / park; a
// device-lost code also marks the instance broken for good.
TRITONSERVER_Error*
AclOmInstance::SyncFailed(aclError rc, TRITONSERVER_Error* err)
{
  stream_busy_ = true;  // teardown must not wait for it
  NoteFailure(rc);
  const DeviceErrorCode* device_error = FindDeviceErrorCode(rc);
  if (device_error != nullptr && device_error->cls == DeviceErrorClass::kLost) {
    return WrapError(
        err, NPU_GE_MSG(
                 "device " << device_id_ << " is lost (ACL error " << rc << ", "
                           << device_error->name
                           << ", is of the device-lost class): the instance is broken "
                              "and serves no more requests"));
  }
  if (device_error != nullptr) {
    return WrapError(
        err, NPU_GE_MSG(
                 "device " << device_id_ << " reported a device fault (ACL error " << rc
                           << ", " << device_error->name
                           << ", counted in npu_ge_device_errors_total); the instance "
                              "rebuilds its context, stream and buffers before its next "
                              "execution"));
  }
  if (rc == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) {
    return WrapError(
        err,
        NPU_GE_MSG(
            "execution did not finish within execute_timeout_ms="
            << spec_.execute_timeout_ms << " ms; it is abandoned and the instance "
            << "rebuilds its context, stream and buffers before its next execution"));
  }
  return WrapError(
      err,
      "queued work (input copies, aclmdlExecuteAsync, output copies) failed; "
      "the instance rebuilds its context, stream and buffers before its next "
      "execution");
}

void
AclOmInstance::NoteFailure(aclError rc)
{
  const DeviceErrorClass cls = ClassifyDeviceError(rc);
  if (cls == DeviceErrorClass::kNone) return;
  if (cls == DeviceErrorClass::kLost) {
    lost_code_ = rc;
    device_lost_ = true;
  }
  std::lock_guard<std::mutex> lock(device_errors_mu_);
  device_errors_.push_back(rc);
}

TRITONSERVER_Error*
AclOmInstance::Wait(size_t s, uint64_t* compute_end_ns)
{
  NPU_GE_RETURN_IF_ERROR(ctx_.MakeCurrent());  // Wait may run on another thread
  int32_t status = 0;
  NPU_GE_RETURN_IF_ERROR(Broken(Synchronize(&status)));
  *compute_end_ns = NowNs();
  sync_status_[s] = status;
  if (!pinned_) NPU_GE_RETURN_IF_ERROR(Broken(CopyOutputs(s, false)));
  return nullptr;
}

TRITONSERVER_Error*
AclOmInstance::Run(size_t exec_rows, uint64_t* compute_start_ns, uint64_t* compute_end_ns)
{
  NPU_GE_RETURN_IF_ERROR(Launch(0, exec_rows, compute_start_ns));
  return Wait(0, compute_end_ns);
}

}  // namespace

PreloadedOm::~PreloadedOm()
{
  if (!model.held()) return;
  // Unload in the context the model was loaded in, as CANN requires.
  LogAndDelete(ctx.MakeCurrent(), "cannot select the context of a described model");
  model.Reset();
}

// Load and describe share one context, as CANN requires; the loaded model
// stays, with its context, for the first instance on `device`.
TRITONSERVER_Error*
DescribeOmModel(
    const AclRuntime* rt, int32_t device, const std::string& path, ModelIoDesc* io,
    std::unique_ptr<PreloadedOm>* loaded)
{
  std::unique_ptr<PreloadedOm> om(new PreloadedOm());
  om->device = device;
  NPU_GE_RETURN_IF_ERROR(DeviceRef::Acquire(rt, device, &om->device_ref));
  NPU_GE_RETURN_IF_ERROR(ContextOwner::Create(rt, device, &om->ctx));
  NPU_GE_RETURN_IF_ERROR(om->ctx.MakeCurrent());
  TRITONSERVER_Error* err = LoadedModel::Load(rt, path, &om->model);
  if (err == nullptr) {
    ModelDesc desc;  // host memory only: released here, in the same context
    err = ModelDesc::FromModel(rt, om->model, &desc);
    if (err == nullptr) err = ReadOmDescription(*rt, desc.get(), io);
  }
  if (err != nullptr) return WrapError(err, "cannot read " + path);
  *loaded = std::move(om);
  return nullptr;
}

TRITONSERVER_Error*
AclOmEngine::Create(
    std::shared_ptr<AclRuntime> runtime, const ModelConfigSpec& spec,
    const std::string& model_path, const ModelIoDesc& io,
    std::unique_ptr<PreloadedOm> loaded, std::unique_ptr<Engine>* engine)
{
  std::unique_ptr<AclOmEngine> e(new AclOmEngine());
  e->runtime_ = std::move(runtime);
  e->loaded_ = std::move(loaded);
  e->spec_ = spec;
  e->model_path_ = model_path;
  e->io_ = io;
  NPU_GE_RETURN_IF_ERROR(
      BindConfigToModel(spec, e->io_, spec.model_filename, &e->binding_));
  engine->reset(e.release());
  return nullptr;
}

TRITONSERVER_Error*
AclOmEngine::CreateInstance(int32_t device, std::unique_ptr<EngineInstance>* instance)
{
  std::unique_ptr<PreloadedOm> adopt;
  {
    std::lock_guard<std::mutex> lock(loaded_mu_);
    if (loaded_ != nullptr && loaded_->device == device) adopt = std::move(loaded_);
  }
  std::unique_ptr<AclOmInstance> inst(
      new AclOmInstance(runtime_, spec_, io_, binding_, device, model_path_));
  NPU_GE_RETURN_IF_ERROR(inst->Init(adopt.get()));
  instance->reset(inst.release());
  return nullptr;
}

}  // namespace npu_ge
