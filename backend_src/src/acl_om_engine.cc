#include "acl_om_engine.h"

#include <chrono>
#include <cstring>

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
  }
  *io = std::move(out);
  return nullptr;
}

namespace {

class AclOmInstance : public EngineInstance {
 public:
  AclOmInstance(
      std::shared_ptr<AclRuntime> rt, const ModelConfigSpec& spec, const ModelIoDesc& io,
      const IoBinding& binding)
      : rt_(std::move(rt)), spec_(spec), io_(io), binding_(binding)
  {
  }

  ~AclOmInstance() override
  {
    // Buffers, datasets, model and stream are released on this context.
    if (ctx_.get() != nullptr) {
      LogAndDelete(ctx_.MakeCurrent(), "cannot select the instance context");
    }
  }

  TRITONSERVER_Error* Init(int32_t device, const std::string& path);

  uint8_t* InputStaging(size_t i) override { return in_host_[i].data(); }
  const uint8_t* OutputStaging(size_t i) const override { return out_host_[i].data(); }
  TRITONSERVER_Error* Run(
      size_t exec_rows, uint64_t* compute_start_ns, uint64_t* compute_end_ns) override;
  size_t DeviceBytes() const override { return device_bytes_; }

 private:
  TRITONSERVER_Error* AllocateIo();

  // Declaration order is release order reversed: datasets and buffers go
  // first, then the model, stream, context and the device reference.
  std::shared_ptr<AclRuntime> rt_;
  const ModelConfigSpec& spec_;
  const ModelIoDesc& io_;
  const IoBinding& binding_;
  DeviceRef device_;
  ContextOwner ctx_;
  StreamOwner stream_;
  LoadedModel model_;
  std::vector<DeviceBuffer> in_dev_;   // model input order
  std::vector<DeviceBuffer> out_dev_;  // model output order
  Dataset in_ds_;
  Dataset out_ds_;
  std::vector<std::vector<uint8_t>> in_host_;   // config input order
  std::vector<std::vector<uint8_t>> out_host_;  // config output order
  size_t device_bytes_ = 0;
};

TRITONSERVER_Error*
AclOmInstance::Init(int32_t device, const std::string& path)
{
  NPU_GE_RETURN_IF_ERROR(DeviceRef::Acquire(rt_.get(), device, &device_));
  NPU_GE_RETURN_IF_ERROR(ContextOwner::Create(rt_.get(), device, &ctx_));
  NPU_GE_RETURN_IF_ERROR(ctx_.MakeCurrent());
  NPU_GE_RETURN_IF_ERROR(StreamOwner::Create(rt_.get(), &stream_));
  NPU_GE_RETURN_IF_ERROR(LoadedModel::Load(rt_.get(), path, &model_));
  size_t work = 0, weight = 0;
  if (rt_->aclmdlQuerySize != nullptr &&
      rt_->aclmdlQuerySize(path.c_str(), &work, &weight) == ACL_SUCCESS) {
    device_bytes_ += work + weight;
  }
  return AllocateIo();
}

TRITONSERVER_Error*
AclOmInstance::AllocateIo()
{
  const size_t n_in = io_.inputs.size() + (io_.has_dynamic_batch_input ? 1 : 0);
  std::vector<size_t> in_sizes(n_in, io_.dynamic_batch_input_size);
  for (size_t k = 0; k < io_.inputs.size(); ++k) {
    in_sizes[io_.input_model_index[k]] = io_.inputs[k].byte_size;
  }
  NPU_GE_RETURN_IF_ERROR(Dataset::Create(rt_.get(), &in_ds_));
  NPU_GE_RETURN_IF_ERROR(Dataset::Create(rt_.get(), &out_ds_));
  in_dev_.resize(n_in);
  for (size_t m = 0; m < n_in; ++m) {
    NPU_GE_RETURN_IF_ERROR(DeviceBuffer::Allocate(rt_.get(), in_sizes[m], &in_dev_[m]));
    NPU_GE_RETURN_IF_ERROR(in_ds_.AddBuffer(in_dev_[m].get(), in_sizes[m]));
    device_bytes_ += in_sizes[m];
  }
  out_dev_.resize(io_.outputs.size());
  for (size_t m = 0; m < io_.outputs.size(); ++m) {
    const size_t size = io_.outputs[m].byte_size;
    NPU_GE_RETURN_IF_ERROR(DeviceBuffer::Allocate(rt_.get(), size, &out_dev_[m]));
    NPU_GE_RETURN_IF_ERROR(out_ds_.AddBuffer(out_dev_[m].get(), size));
    device_bytes_ += size;
  }
  auto staging = [&](const TensorConfig& cfg, const ModelTensorDesc& model,
                     const char* what,
                     std::vector<uint8_t>* host) -> TRITONSERVER_Error* {
    const size_t need = cfg.RowBytes() * binding_.max_exec_rows;
    if (model.byte_size < need) {
      return NPU_GE_ERROR(
          INVALID_ARG, what << " '" << cfg.name << "': expected the model to hold "
                            << need << " bytes for " << binding_.max_exec_rows
                            << " row(s), got " << model.byte_size);
    }
    host->assign(need, 0);
    return nullptr;
  };
  in_host_.resize(spec_.inputs.size());
  for (size_t i = 0; i < spec_.inputs.size(); ++i) {
    NPU_GE_RETURN_IF_ERROR(staging(
        spec_.inputs[i], io_.inputs[binding_.input_index[i]], "input", &in_host_[i]));
  }
  out_host_.resize(spec_.outputs.size());
  for (size_t i = 0; i < spec_.outputs.size(); ++i) {
    NPU_GE_RETURN_IF_ERROR(staging(
        spec_.outputs[i], io_.outputs[binding_.output_index[i]], "output",
        &out_host_[i]));
  }
  return nullptr;
}

TRITONSERVER_Error*
AclOmInstance::Run(size_t exec_rows, uint64_t* compute_start_ns, uint64_t* compute_end_ns)
{
  NPU_GE_RETURN_IF_ERROR(ctx_.MakeCurrent());
  for (size_t i = 0; i < spec_.inputs.size(); ++i) {
    const size_t m = io_.input_model_index[binding_.input_index[i]];
    const size_t bytes = exec_rows * spec_.inputs[i].RowBytes();
    NPU_GE_RETURN_IF_ACL_ERROR(
        *rt_, aclrtMemcpy(
                  in_dev_[m].get(), in_dev_[m].size(), in_host_[i].data(), bytes,
                  ACL_MEMCPY_HOST_TO_DEVICE));
  }
  if (!binding_.gears.empty()) {
    NPU_GE_RETURN_IF_ACL_ERROR(
        *rt_, aclmdlSetDynamicBatchSize(
                  model_.id(), in_ds_.get(), io_.dynamic_batch_input_index, exec_rows));
  }
  *compute_start_ns = NowNs();
  NPU_GE_RETURN_IF_ACL_ERROR(
      *rt_, aclmdlExecuteAsync(model_.id(), in_ds_.get(), out_ds_.get(), stream_.get()));
  NPU_GE_RETURN_IF_ACL_ERROR(*rt_, aclrtSynchronizeStream(stream_.get()));
  *compute_end_ns = NowNs();
  for (size_t i = 0; i < spec_.outputs.size(); ++i) {
    const size_t m = binding_.output_index[i];
    const size_t bytes = exec_rows * spec_.outputs[i].RowBytes();
    NPU_GE_RETURN_IF_ACL_ERROR(
        *rt_, aclrtMemcpy(
                  out_host_[i].data(), out_host_[i].size(), out_dev_[m].get(), bytes,
                  ACL_MEMCPY_DEVICE_TO_HOST));
  }
  return nullptr;
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
  std::unique_ptr<AclOmInstance> inst(new AclOmInstance(runtime_, spec_, io_, binding_));
  NPU_GE_RETURN_IF_ERROR(inst->Init(device, model_path_));
  instance->reset(inst.release());
  return nullptr;
}

}  // namespace npu_ge
