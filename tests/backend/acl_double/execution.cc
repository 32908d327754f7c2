// TEST DOUBLE: model execution. aclmdlExecuteAsync checks what the real
// runtime checks when the task is queued and queues it on the stream
// (streams.h); the stream's thread later applies the model file's
// directives, its cost (delay_us + delay_per_row_us x rows) and its formula.
// An execution writes its outputs only while its buffers are still the
// allocations they were when it was queued (runtime_state.h: a late write of
// a stream destroyed by force is counted, a write into freed memory is
// counted and not done).
// $NPU_GE_DOUBLE_LOSE_DEVICE_ON_VALUE=<v>: an execution whose first input
// holds v fails with ACL_ERROR_RT_LOST_HEARTBEAT and the device is lost: every
// later execution, copy, stream creation and device synchronize on it fails
// with that code (CANN's device-lost class: device_errors.h).
// $NPU_GE_DOUBLE_DEVICE_ERROR=<device>:<aclError>[:<after_n_executions>]: the
// execution on <device> that follows its first n (default 0) fails with
// <aclError> (e.g. 507054, ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR), and the
// device stays in error: every later execution, copy, stream creation and
// device synchronize on it returns that code, as a lost device does (the
// double never repairs or resets a device). The code surfaces where CANN
// returns an asynchronous task's failure: from the stream synchronize that
// waits for it (hicann/runtime src/acl/aclrt_impl/stream.cpp:
// aclrtSynchronizeStream[WithTimeout] return the runtime's synchronize error
// as its ACL code, ACL_GET_ERRCODE_RTS; src/runtime/core/src/common/
// errcode_manage.cc turns e.g. RT_ERROR_MEM_RAS_ERROR into
// ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR). Other
// devices are untouched. A malformed value fails every execution with
// ACL_ERROR_INVALID_PARAM naming the variable.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "models.h"
#include "runtime_state.h"
#include "streams.h"

using namespace acl_double;  // NOLINT: this file is part of the double's state

namespace {

// Bytes of tensor `t` (shaped like input `input`) in an execution of `rows`
// rows, or of shape gear `gear` when the model has dims/image size gears.
size_t
ExecBytes(
    const ModelSpec& s, const acl_double::TensorSpec& t, size_t input, uint64_t rows,
    int64_t gear)
{
  if (gear < 0) return s.TensorBytes(t, rows);
  return s.BytesInGear(t, input, static_cast<size_t>(gear));
}

// Checks datasets and returns the rows to compute and the shape gear (-1
// for a model without dims/image size gears); message set on error.
aclError
CheckDatasetsLocked(
    const LoadedModel& m, const aclmdlDataset* in, const aclmdlDataset* out,
    int32_t device, uint64_t* rows, int64_t* gear)
{
  const ModelSpec& s = *m.spec;
  if (m.device != device)
    return Fail(ACL_ERROR_RT_CONTEXT_NULL, "model is on another device");
  if (g_datasets.count(const_cast<aclmdlDataset*>(in)) == 0 ||
      g_datasets.count(const_cast<aclmdlDataset*>(out)) == 0) {
    return Fail(ACL_ERROR_INVALID_PARAM, "unknown dataset");
  }
  if (in->buffers.size() != IoView{s}.NumInputs() ||
      out->buffers.size() != s.outputs.size()) {
    return Fail(ACL_ERROR_INVALID_PARAM, "dataset buffer count does not match the model");
  }
  *rows = 1;
  if (!s.gears.empty()) {
    if (in->dynamic_batch == 0) {
      return Fail(ACL_ERROR_INVALID_PARAM, "dynamic batch size not set");
    }
    *rows = in->dynamic_batch;
  }
  *gear = -1;
  if (s.ShapeGearCount() > 0) {  // CANN cannot run such a model without its gear
    if (in->shape_gear < 0) {
      return Fail(
          ACL_ERROR_INVALID_PARAM,
          s.hw_gears.empty() ? "dynamic dims not set (aclmdlSetInputDynamicDims)"
                             : "dynamic image size not set (aclmdlSetDynamicHWSize)");
    }
    *gear = in->shape_gear;
  }
  auto check = [&](const aclDataBuffer* b, size_t need) -> aclError {
    if (b->size < need) return Fail(ACL_ERROR_INVALID_PARAM, "data buffer too small");
    const Allocation* a = FindAllocationLocked(b->data, need);
    if (a == nullptr || a->device != device) {
      return Fail(
          ACL_ERROR_INVALID_PARAM, "data buffer is not device memory of this device");
    }
    return ACL_SUCCESS;
  };
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    aclError rc = check(in->buffers[i], ExecBytes(s, s.inputs[i], i, *rows, *gear));
    if (rc != ACL_SUCCESS) return rc;
  }
  for (size_t i = 0; i < s.outputs.size(); ++i) {
    aclError rc = check(
        out->buffers[i], ExecBytes(s, s.outputs[i], s.outputs[i].from[0], *rows, *gear));
    if (rc != ACL_SUCCESS) return rc;
  }
  return ACL_SUCCESS;
}

// One model execution as queued on a stream. The buffers are captured when it
// is queued (the backend may reuse or destroy the datasets before it runs);
// their contents are read only when the stream reaches it.
struct Execution {
  std::shared_ptr<const ModelSpec> model;
  const ModelSpec& spec() const { return *model; }
  std::vector<const void*> in;
  std::vector<void*> out;
  std::vector<size_t> in_bytes, out_bytes;      // as checked when queued
  std::vector<uint64_t> in_serial, out_serial;  // SerialOfLocked when queued
  uint64_t rows = 0;
  int64_t gear = -1;  // dims/image size gear, -1: none
  int32_t device = -1;
};

bool
InputZeroHolds(const Execution& x, double value)
{
  const acl_double::TensorSpec& t = x.spec().inputs[0];
  const size_t n =
      ExecBytes(x.spec(), t, 0, x.rows, x.gear) / acl_double::DtypeSize(t.dtype);
  for (size_t e = 0; e < n; ++e) {
    if (acl_double::ReadElement(x.in[0], t.dtype, e) == value) return true;
  }
  return false;
}

void
Compute(const Execution& x)
{
  const ModelSpec& s = x.spec();
  for (size_t o = 0; o < s.outputs.size(); ++o) {
    const acl_double::OutputSpec& spec = s.outputs[o];
    const size_t n = ExecBytes(s, spec, spec.from[0], x.rows, x.gear) /
                     acl_double::DtypeSize(spec.dtype);
    for (size_t e = 0; e < n; ++e) {
      double sum = 0;
      for (size_t k : spec.from) {
        sum += acl_double::ReadElement(x.in[k], s.inputs[k].dtype, e);
      }
      acl_double::WriteElement(x.out[o], spec.dtype, e, spec.scale * sum + spec.offset);
    }
  }
}

// $NPU_GE_DOUBLE_DEVICE_ERROR, parsed; `set` false when unset or empty.
struct DeviceErrorKnob {
  bool set = false;
  bool valid = true;
  int32_t device = -1;
  aclError code = ACL_SUCCESS;
  uint64_t after = 0;
};

DeviceErrorKnob
ReadDeviceErrorKnob()
{
  DeviceErrorKnob k;
  const char* v = std::getenv("NPU_GE_DOUBLE_DEVICE_ERROR");
  if (v == nullptr || *v == '\0') return k;
  k.set = true;
  long device = -1, code = 0;
  unsigned long long after = 0;
  int used = 0;
  const int n = std::sscanf(v, "%ld:%ld%n:%llu%n", &device, &code, &used, &after, &used);
  k.valid = (n == 2 || n == 3) && v[used] == '\0' && device >= 0 && code > 0;
  k.device = static_cast<int32_t>(device);
  k.code = static_cast<aclError>(code);
  k.after = after;
  return k;
}

bool
LosesDevice(const Execution& x)
{
  const char* v = std::getenv("NPU_GE_DOUBLE_LOSE_DEVICE_ON_VALUE");
  return v != nullptr && *v != '\0' && InputZeroHolds(x, std::atof(v));
}

// Computes the outputs if every buffer is still the memory it was when the
// execution was queued; false (counted) when one was freed meanwhile.
bool
ComputeIfOwned(const Execution& x, const Stream& stream)
{
  std::lock_guard<std::mutex> lock(g_mu);
  bool owned = true;
  for (size_t i = 0; i < x.in.size(); ++i) {
    owned = StillOwnedLocked(x.in[i], x.in_bytes[i], x.in_serial[i], false) && owned;
  }
  const bool late = stream.orphaned();
  for (size_t o = 0; o < x.out.size(); ++o) {
    owned = StillOwnedLocked(x.out[o], x.out_bytes[o], x.out_serial[o], late) && owned;
  }
  if (owned) Compute(x);  // under g_mu: nothing is freed while it writes
  return owned;
}

// Runs on the stream's thread: the model's directives, its cost, its formula.
acl_double::TaskResult
RunExecution(const Execution& x, Stream& stream)
{
  const auto start = stream.task_start();
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (const aclError lost = LostCodeLocked(x.device)) {
      return {lost, "the device is in error (ACL error " + std::to_string(lost) + ")"};
    }
    const DeviceErrorKnob knob = ReadDeviceErrorKnob();
    if (knob.set && !knob.valid) {
      return {
          ACL_ERROR_INVALID_PARAM,
          "NPU_GE_DOUBLE_DEVICE_ERROR is not <device>:<aclError>[:<after_n_executions>]"};
    }
    if (knob.set && knob.device == x.device &&
        g_executions_by_device[x.device] >= knob.after) {
      g_lost_devices[x.device] = knob.code;
      WriteStreamStateLocked();
      return {
          knob.code, "device " + std::to_string(x.device) + " reported ACL error " +
                         std::to_string(knob.code) + " (NPU_GE_DOUBLE_DEVICE_ERROR)"};
    }
    bool owned = true;  // the directives below read the first input
    for (size_t i = 0; i < x.in.size(); ++i) {
      owned = StillOwnedLocked(x.in[i], x.in_bytes[i], x.in_serial[i], false) && owned;
    }
    if (!owned) {
      return {
          ACL_ERROR_RT_MODEL_EXECUTE, "execution started after its inputs were freed"};
    }
  }
  if (LosesDevice(x)) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_lost_devices[x.device] = ACL_ERROR_RT_LOST_HEARTBEAT;
    WriteStreamStateLocked();
    return {
        ACL_ERROR_RT_LOST_HEARTBEAT,
        "device " + std::to_string(x.device) +
            " lost its heartbeat (NPU_GE_DOUBLE_LOSE_DEVICE_ON_VALUE)"};
  }
  if (x.spec().has_hang_value && InputZeroHolds(x, x.spec().hang_value)) {
    stream.SleepUntil(std::chrono::steady_clock::time_point::max());  // until destroyed
    return {ACL_ERROR_RT_MODEL_EXECUTE, "execution abandoned (hang_on_value)"};
  }
  if (x.spec().has_fail_value && InputZeroHolds(x, x.spec().fail_value)) {
    return {
        ACL_ERROR_RT_MODEL_EXECUTE,
        "model execution failed: input '" + x.spec().inputs[0].name + "'" +
            " holds the poison value (fail_execute_on_value)"};
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_executions;  // counted when it starts, as tests watch for a running one
  }
  // The cost counts from when the stream started the execution, so the time
  // spent getting here is part of it, not added to it.
  const auto cost = std::chrono::microseconds(
      x.spec().delay_us + static_cast<int64_t>(x.spec().delay_per_row_us * x.rows));
  if (cost.count() > 0 && !stream.SleepUntil(start + cost)) {
    return {ACL_ERROR_RT_MODEL_EXECUTE, "execution abandoned: stream destroyed"};
  }
  if (!ComputeIfOwned(x, stream)) {
    return {ACL_ERROR_RT_MODEL_EXECUTE, "execution ran after its buffers were freed"};
  }
  RecordBusy(x.device, start, std::chrono::steady_clock::now());
  {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_executions_by_device[x.device];
    WriteStateLocked();
  }
  if (x.spec().has_overflow_value && InputZeroHolds(x, x.spec().overflow_value)) {
    // CANN's runtime returns overflow-type codes from the stream synchronize
    // and logs them as a successful synchronize: the outputs exist.
    return {x.spec().overflow_code, "overflow detected (overflow_on_value)", true};
  }
  return {};
}

}  // namespace

extern "C" {

// Checks what the real runtime checks when the task is queued, then queues
// it: the outputs exist only after the stream is synchronized.
aclError
aclmdlExecuteAsync(
    uint32_t model_id, const aclmdlDataset* input, aclmdlDataset* output,
    aclrtStream stream)
{
  DOUBLE_ENTER("aclmdlExecuteAsync");
  DOUBLE_NEED_DEVICE("aclmdlExecuteAsync");
  auto it = g_models.find(model_id);
  if (it == g_models.end()) return Fail(ACL_ERROR_INVALID_MODEL_ID, "unknown model id");
  Stream* s = static_cast<Stream*>(stream);
  if (g_streams.count(s) == 0 || s->device() != device) {
    return Fail(ACL_ERROR_RT_STREAM_CONTEXT, "stream not on the current device");
  }
  Execution x;
  aclError rc = CheckDatasetsLocked(it->second, input, output, device, &x.rows, &x.gear);
  if (rc != ACL_SUCCESS) return rc;
  if (const aclError lost = LostCodeLocked(device)) {
    return Fail(lost, "the device is in error (ACL error " + std::to_string(lost) + ")");
  }
  x.model = it->second.spec;
  x.device = device;
  for (const aclDataBuffer* b : input->buffers) {
    x.in.push_back(b->data);
    x.in_bytes.push_back(b->size);
    x.in_serial.push_back(SerialOfLocked(b->data, b->size));
  }
  for (const aclDataBuffer* b : output->buffers) {
    x.out.push_back(b->data);
    x.out_bytes.push_back(b->size);
    x.out_serial.push_back(SerialOfLocked(b->data, b->size));
  }
  const bool instant = x.spec().delay_us == 0 && x.spec().delay_per_row_us == 0 &&
                       !x.spec().has_hang_value;
  s->Enqueue([x](Stream& on) { return RunExecution(x, on); }, instant);
  return ACL_SUCCESS;
}

}  // extern "C"
