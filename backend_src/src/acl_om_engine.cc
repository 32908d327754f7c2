#include "acl_om_engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>

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

// "[224x224, 448x448]" for the image size gears; "" when there are none.
std::string
ImageSizeGears(const AclRuntime& rt, const aclmdlDesc* desc)
{
  aclmdlHW hw{};
  if (rt.aclmdlGetDynamicHW == nullptr ||
      rt.aclmdlGetDynamicHW(desc, static_cast<size_t>(-1), &hw) != ACL_SUCCESS ||
      hw.hwCount == 0) {
    return "";
  }
  std::string text;
  for (size_t g = 0; g < hw.hwCount && g < ACL_MAX_HW_NUM; ++g) {
    text += (g == 0 ? "" : ", ") + std::to_string(hw.hw[g][0]) + "x" +
            std::to_string(hw.hw[g][1]);
  }
  return "[" + text + "]";
}

// "[1,8], [1,16]" (all inputs' dims per gear); "" when there are none.
std::string
DimsGears(const AclRuntime& rt, const aclmdlDesc* desc)
{
  size_t count = 0;
  if (rt.aclmdlGetInputDynamicGearCount == nullptr ||
      rt.aclmdlGetInputDynamicDims == nullptr ||
      rt.aclmdlGetInputDynamicGearCount(desc, static_cast<size_t>(-1), &count) !=
          ACL_SUCCESS ||
      count == 0) {
    return "";
  }
  std::vector<aclmdlIODims> gears(count);
  if (rt.aclmdlGetInputDynamicDims(desc, static_cast<size_t>(-1), gears.data(), count) !=
      ACL_SUCCESS) {
    return "";
  }
  std::string text;
  for (size_t g = 0; g < count; ++g) {
    std::vector<int64_t> dims(gears[g].dims, gears[g].dims + gears[g].dimCount);
    text += (g == 0 ? "" : ", ") + DimsToString(dims);
  }
  return text;
}

// A model with the dynamic-shape input but no batch gears was compiled with
// dims or image size gears, which npu_ge does not serve yet: the load fails
// naming them (when this CANN can list them) and the way out.
TRITONSERVER_Error*
UnsupportedGears(const AclRuntime& rt, const aclmdlDesc* desc)
{
  const std::string hw = ImageSizeGears(rt, desc);
  if (!hw.empty()) {
    return NPU_GE_ERROR(
        UNSUPPORTED, "compiled with dynamic image size gears "
                         << hw << " (atc --dynamic_image_size); npu_ge serves dynamic "
                         << "batch gears only: compile with a fixed image size or "
                         << "with --dynamic_batch_size");
  }
  const std::string dims = DimsGears(rt, desc);
  return NPU_GE_ERROR(
      UNSUPPORTED, "compiled with dynamic dims gears "
                       << (dims.empty() ? std::string("(not listed by this CANN)") : dims)
                       << " (atc --dynamic_dims); npu_ge serves dynamic batch gears "
                       << "only: compile with fixed dims or with --dynamic_batch_size");
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
    aclmdlIODims dims{};
    NPU_GE_RETURN_IF_ACL_ERROR(rt, aclmdlGetInputDims(desc, i, &dims));
    out.inputs.push_back(MakeTensorDesc(
        name, dims, rt.aclmdlGetInputDataType(desc, i),
        rt.aclmdlGetInputSizeByIndex(desc, i)));
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
    if (out.gears.empty()) return UnsupportedGears(rt, desc);
  }
  *io = std::move(out);
  return nullptr;
}

namespace {

// One set of buffers for one execution: device inputs/outputs, their
// datasets, and the host staging the instance gathers into / scatters from.
struct BufferSet {
  std::vector<DeviceBuffer> in_dev;   // model input order
  std::vector<DeviceBuffer> out_dev;  // model output order
  Dataset in_ds;
  Dataset out_ds;
  std::vector<HostBuffer> in_host;   // config input order
  std::vector<HostBuffer> out_host;  // config output order
};

// The host path: staging is pinned when the runtime has aclrtMallocHost (then
// copies are aclrtMemcpyAsync on the instance's stream, queued with the
// execution), else pageable (synchronous aclrtMemcpy around the execution).
// The stream is waited for with aclrtSynchronizeStreamWithTimeout and the
// model's execute_timeout_ms where the runtime has it. Any failure of queued
// work marks the instance broken; Recover rebuilds all of its device state.
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
  ~AclOmInstance() override { Teardown(); }

  TRITONSERVER_Error* Init();

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
  TRITONSERVER_Error* Recover() override;

 private:
  TRITONSERVER_Error* AllocateSet(BufferSet* set, size_t* device_bytes);
  TRITONSERVER_Error* AllocateStaging(BufferSet* set);
  TRITONSERVER_Error* CopyInputs(const BufferSet& set, size_t exec_rows);
  TRITONSERVER_Error* CopyOutputs(size_t set, bool queue);
  TRITONSERVER_Error* Synchronize();
  void Teardown();  // releases every device resource, the stream first
  // Marks the instance broken when `err` is an error; returns `err`.
  TRITONSERVER_Error* Broken(TRITONSERVER_Error* err)
  {
    if (err != nullptr) broken_ = true;
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
  std::vector<BufferSet> sets_;    // 2 with copy_overlap, else 1
  std::vector<size_t> exec_rows_;  // per set, of its launched execution
  size_t device_bytes_ = 0;
  std::atomic<bool> broken_{false};
};

TRITONSERVER_Error*
AclOmInstance::Init()
{
  pinned_ = rt_->has_pinned_host_memory();
  NPU_GE_RETURN_IF_ERROR(DeviceRef::Acquire(rt_.get(), device_id_, &device_));
  NPU_GE_RETURN_IF_ERROR(ContextOwner::Create(rt_.get(), device_id_, &ctx_));
  NPU_GE_RETURN_IF_ERROR(ctx_.MakeCurrent());
  NPU_GE_RETURN_IF_ERROR(StreamOwner::Create(rt_.get(), &stream_));
  NPU_GE_RETURN_IF_ERROR(LoadedModel::Load(rt_.get(), path_, &model_));
  size_t bytes = 0, work = 0, weight = 0;
  if (rt_->aclmdlQuerySize != nullptr &&
      rt_->aclmdlQuerySize(path_.c_str(), &work, &weight) == ACL_SUCCESS) {
    bytes += work + weight;
  }
  sets_.resize(spec_.copy_overlap ? 2 : 1);
  exec_rows_.assign(sets_.size(), 0);
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
  stream_.Reset();  // first: work still queued after a timeout is abandoned
  sets_.clear();
  model_.Reset();
  ctx_.Reset();
  device_.Reset();
}

TRITONSERVER_Error*
AclOmInstance::Recover()
{
  Teardown();
  NPU_GE_RETURN_IF_ERROR(Init());
  broken_ = false;
  return nullptr;
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
    const size_t need = cfg.RowBytes() * binding_.max_exec_rows;
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
AclOmInstance::CopyInputs(const BufferSet& set, size_t exec_rows)
{
  for (size_t i = 0; i < spec_.inputs.size(); ++i) {
    const size_t m = io_.input_model_index[binding_.input_index[i]];
    const DeviceBuffer& dev = set.in_dev[m];
    const size_t bytes = exec_rows * spec_.inputs[i].RowBytes();
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
    const size_t bytes = exec_rows_[s] * spec_.outputs[i].RowBytes();
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
AclOmInstance::Launch(size_t s, size_t exec_rows, uint64_t* compute_start_ns)
{
  BufferSet& set = sets_[s];
  exec_rows_[s] = exec_rows;
  NPU_GE_RETURN_IF_ERROR(ctx_.MakeCurrent());
  if (!pinned_) NPU_GE_RETURN_IF_ERROR(Broken(CopyInputs(set, exec_rows)));
  *compute_start_ns = NowNs();  // with pinned staging, the copy-in is device work
  if (pinned_) NPU_GE_RETURN_IF_ERROR(Broken(CopyInputs(set, exec_rows)));
  if (!binding_.gears.empty()) {
    NPU_GE_RETURN_IF_ERROR(Broken(AclCall(
        *rt_, "aclmdlSetDynamicBatchSize",
        rt_->aclmdlSetDynamicBatchSize(
            model_.id(), set.in_ds.get(), io_.dynamic_batch_input_index, exec_rows))));
  }
  NPU_GE_RETURN_IF_ERROR(Broken(AclCall(
      *rt_, "aclmdlExecuteAsync",
      rt_->aclmdlExecuteAsync(
          model_.id(), set.in_ds.get(), set.out_ds.get(), stream_.get()))));
  if (pinned_) NPU_GE_RETURN_IF_ERROR(Broken(CopyOutputs(s, true)));
  return nullptr;
}

// Waits for everything queued on the stream. Errors of queued work surface
// here, not at the call that queued it.
TRITONSERVER_Error*
AclOmInstance::Synchronize()
{
  if (rt_->aclrtSynchronizeStreamWithTimeout == nullptr) {  // older CANN: unbounded
    const aclError rc = rt_->aclrtSynchronizeStream(stream_.get());
    if (rc == ACL_SUCCESS) return nullptr;
    return WrapError(
        AclError(*rt_, "aclrtSynchronizeStream", rc),
        "queued work (input copies, aclmdlExecuteAsync, output copies) failed");
  }
  const int32_t timeout_ms = static_cast<int32_t>(
      std::min<int64_t>(spec_.execute_timeout_ms, std::numeric_limits<int32_t>::max()));
  const aclError rc = rt_->aclrtSynchronizeStreamWithTimeout(stream_.get(), timeout_ms);
  if (rc == ACL_SUCCESS) return nullptr;
  TRITONSERVER_Error* err = AclError(*rt_, "aclrtSynchronizeStreamWithTimeout", rc);
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

TRITONSERVER_Error*
AclOmInstance::Wait(size_t s, uint64_t* compute_end_ns)
{
  NPU_GE_RETURN_IF_ERROR(ctx_.MakeCurrent());  // Wait may run on another thread
  NPU_GE_RETURN_IF_ERROR(Broken(Synchronize()));
  *compute_end_ns = NowNs();
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

// Load, describe and unload share one context, as CANN requires.
TRITONSERVER_Error*
DescribeOmModel(
    const AclRuntime* rt, int32_t device, const std::string& path, ModelIoDesc* io)
{
  DeviceRef device_ref;
  NPU_GE_RETURN_IF_ERROR(DeviceRef::Acquire(rt, device, &device_ref));
  ContextOwner ctx;
  NPU_GE_RETURN_IF_ERROR(ContextOwner::Create(rt, device, &ctx));
  NPU_GE_RETURN_IF_ERROR(ctx.MakeCurrent());
  TRITONSERVER_Error* err = nullptr;
  {
    LoadedModel model;
    ModelDesc desc;
    err = LoadedModel::Load(rt, path, &model);
    if (err == nullptr) err = ModelDesc::FromModel(rt, model, &desc);
    if (err == nullptr) err = ReadOmDescription(*rt, desc.get(), io);
  }  // desc and model released while the context is still current
  return WrapError(err, "cannot read " + path);
}

TRITONSERVER_Error*
AclOmEngine::Create(
    std::shared_ptr<AclRuntime> runtime, const ModelConfigSpec& spec,
    const std::string& model_path, const ModelIoDesc& io, std::unique_ptr<Engine>* engine)
{
  std::unique_ptr<AclOmEngine> e(new AclOmEngine());
  e->runtime_ = std::move(runtime);
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
  std::unique_ptr<AclOmInstance> inst(
      new AclOmInstance(runtime_, spec_, io_, binding_, device, model_path_));
  NPU_GE_RETURN_IF_ERROR(inst->Init());
  instance->reset(inst.release());
  return nullptr;
}

}  // namespace npu_ge
