#include "model_instance_state.h"

#include "triton_utils.h"

namespace npu_ge {

TRITONSERVER_Error*
ModelInstanceState::Create(
    ModelState* model, TRITONBACKEND_ModelInstance* instance,
    std::unique_ptr<ModelInstanceState>* state)
{
  std::unique_ptr<ModelInstanceState> s(new ModelInstanceState());
  s->model_ = model;
  s->instance_ = instance;
  const char* name = nullptr;
  NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceName(instance, &name));
  s->name_ = name;
  s->device_ = model->NextDevice();
  s->log_prefix_ = NPU_GE_MSG(
      "model '" << model->name() << "' version " << model->version() << " instance '"
                << s->name_ << "' device " << s->device_);
  NPU_GE_RETURN_IF_ERROR(
      WrapError(model->engine().CreateInstance(s->device_, &s->engine_), s->log_prefix_));
  NPU_GE_RETURN_IF_ERROR(s->ReportMemory());
  std::shared_ptr<AclRuntime> runtime;
  NPU_GE_RETURN_IF_ERROR(model->backend().Runtime(&runtime));
  s->telemetry_ = model->backend().telemetry().Register(
      runtime, model->name(), model->version(), s->name_, s->device_);
  NPU_GE_LOG(
      INFO, s->log_prefix_ << ": ready, " << s->engine_->DeviceBytes()
                           << " bytes of device memory");
  *state = std::move(s);
  return nullptr;
}

TRITONSERVER_Error*
ModelInstanceState::ReportMemory()
{
  // Triton accepts CPU, CPU_PINNED and GPU usage only: NPU memory is reported
  // as GPU memory with the NPU id.
  TRITONSERVER_BufferAttributes* attrs = nullptr;
  NPU_GE_RETURN_IF_ERROR(TRITONSERVER_BufferAttributesNew(&attrs));
  std::unique_ptr<TRITONSERVER_BufferAttributes, void (*)(TRITONSERVER_BufferAttributes*)>
      owner(attrs, [](TRITONSERVER_BufferAttributes* a) {
        LogAndDelete(TRITONSERVER_BufferAttributesDelete(a), "buffer attributes");
      });
  NPU_GE_RETURN_IF_ERROR(
      TRITONSERVER_BufferAttributesSetMemoryType(attrs, TRITONSERVER_MEMORY_GPU));
  NPU_GE_RETURN_IF_ERROR(TRITONSERVER_BufferAttributesSetMemoryTypeId(attrs, device_));
  NPU_GE_RETURN_IF_ERROR(
      TRITONSERVER_BufferAttributesSetByteSize(attrs, engine_->DeviceBytes()));
  return TRITONBACKEND_ModelInstanceReportMemoryUsage(instance_, &attrs, 1);
}

}  // namespace npu_ge
