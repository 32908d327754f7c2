#include "model_instance_state.h"

#include "instance_job.h"

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
  s->set_free_.assign(s->engine_->BufferSets(), true);
  if (s->engine_->BufferSets() > 1) {
    s->completer_ = std::thread(&ModelInstanceState::CompletionLoop, s.get());
  }
  NPU_GE_LOG(
      INFO, s->log_prefix_ << ": ready, " << s->engine_->DeviceBytes()
                           << " bytes of device memory, " << s->engine_->BufferSets()
                           << " buffer set(s)");
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

ModelInstanceState::~ModelInstanceState()
{
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (completer_.joinable()) completer_.join();  // after it answered every job
  if (engine_ == nullptr) return;
  // Parked executions are freed now, after a bounded device synchronize, or
  // left allocated for good and counted (acl_recovery.h).
  const size_t leaked = engine_->ReleaseParked();
  if (telemetry_ != nullptr) telemetry_->CountParkedLeaked(leaked);
  engine_.reset();  // before telemetry_, which outlives it
}

TRITONSERVER_Error*
ModelInstanceState::Ready() const
{
  if (engine_ == nullptr) return nullptr;
  std::string why = engine_->OutOfService();
  if (why.empty() && engine_->DeviceLost()) {
    why = "its device reported a device-lost class of error; the instance is broken";
  }
  if (why.empty()) return nullptr;
  return NPU_GE_ERROR(UNAVAILABLE, log_prefix_ << ": not ready: " << why);
}

void
ModelInstanceState::NoteHealth() noexcept
{
  if (telemetry_ == nullptr) return;
  for (const int32_t code : engine_->TakeDeviceErrors()) {
    telemetry_->CountDeviceError(code);
  }
  telemetry_->SetParked(engine_->ParkedExecutions());
  if (engine_->DeviceLost() && !device_lost_counted_.exchange(true)) {
    telemetry_->CountDeviceLost();
    telemetry_->SetBroken();
  }
  if (!engine_->OutOfService().empty()) telemetry_->SetBroken();
}

// ---- pipeline bookkeeping ------------------------------------------------------
size_t
ModelInstanceState::AcquireSet()
{
  std::unique_lock<std::mutex> lock(mu_);
  size_t set = 0;
  cv_.wait(lock, [&] {
    for (set = 0; set < set_free_.size(); ++set) {
      if (set_free_[set]) return true;
    }
    return false;
  });
  set_free_[set] = false;
  return set;
}

void
ModelInstanceState::ReleaseSet(size_t set)
{
  {
    std::lock_guard<std::mutex> lock(mu_);
    set_free_[set] = true;
  }
  cv_.notify_all();
}

void
ModelInstanceState::WaitDeviceIdle(size_t held)
{
  std::unique_lock<std::mutex> lock(mu_);
  if (!device_busy_) return;
  if (telemetry_ != nullptr) telemetry_->SetHeld(held);
  cv_.wait(lock, [this] { return !device_busy_; });
  if (telemetry_ != nullptr) telemetry_->SetHeld(0);
}

void
ModelInstanceState::SetDeviceBusy(bool busy)
{
  {
    std::lock_guard<std::mutex> lock(mu_);
    device_busy_ = busy;
  }
  cv_.notify_all();
}

// Called by Execute holding one buffer set: waits until every other set is
// free (no execution in flight, none being answered), then rebuilds.
TRITONSERVER_Error*
ModelInstanceState::RecoverWhenIdle()
{
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] {
      size_t free_sets = 0;
      for (bool f : set_free_) free_sets += f ? 1 : 0;
      return !device_busy_ && launched_.empty() && free_sets + 1 == set_free_.size();
    });
  }
  const uint64_t start_ns = NowNs();
  TRITONSERVER_Error* err = engine_->Recover();
  NoteHealth();
  if (err != nullptr) return err;
  telemetry_->CountRecovery();
  NPU_GE_LOG(
      WARN, log_prefix_ << ": rebuilt context, stream, model and buffers after a "
                        << "failed execution (" << (NowNs() - start_ns) / 1000
                        << " us); serving again");
  return nullptr;
}

void
ModelInstanceState::CompletionLoop()
{
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !launched_.empty(); });
    if (launched_.empty()) return;  // stopping, and every job answered
    std::unique_ptr<Job> job = std::move(launched_.front());
    launched_.pop_front();
    lock.unlock();
    Complete(*job);
    lock.lock();
  }
}

}  // namespace npu_ge
