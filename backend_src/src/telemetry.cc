#include "telemetry.h"

#include <chrono>
#include <string>
#include <vector>

#include "acl_utils.h"
#include "triton_utils.h"

namespace npu_ge {

TelemetryRegistration::~TelemetryRegistration()
{
  if (owner_ != nullptr) owner_->Unregister(this);
}

namespace {

using MetricUpdate = TRITONSERVER_Error* (*)(TRITONSERVER_Metric*, double);

// A metric Triton would not create (NewMetric logged why) is null: nothing to update.
void
Update(
    MetricUpdate update, const char* verb, TRITONSERVER_Metric* metric, double value,
    const char* name)
{
  if (metric != nullptr) {
    LogAndDelete(
        update(metric, value), (std::string("cannot ") + verb + " " + name).c_str());
  }
}

void
Add(TRITONSERVER_Metric* metric, double value, const char* name)
{
  Update(TRITONSERVER_MetricIncrement, "count", metric, value, name);
}

void
Set(TRITONSERVER_Metric* metric, double value, const char* name)
{
  Update(TRITONSERVER_MetricSet, "set", metric, value, name);
}

}  // namespace

void
TelemetryRegistration::CountRecovery()
{
  Add(recoveries_, 1, "npu_ge_instance_recoveries_total");
}

void
TelemetryRegistration::CountOverflow()
{
  Add(overflows_, 1, "npu_ge_execution_overflows_total");
}

void
TelemetryRegistration::SetBroken()
{
  Set(broken_, 1, "npu_ge_instance_broken");
}

void
TelemetryRegistration::CountDeviceLost()
{
  Add(device_lost_, 1, "npu_ge_device_lost_total");
}

void
TelemetryRegistration::SetHeld(size_t n)
{
  Set(held_, static_cast<double>(n), "npu_ge_instance_held_requests");
}

void
TelemetryRegistration::SetParked(size_t n)
{
  Set(parked_, static_cast<double>(n), "npu_ge_parked_executions");
}

void
TelemetryRegistration::CountParkedLeaked(size_t n)
{
  if (owner_ != nullptr && n > 0) owner_->CountParkedLeaked(device_, n);
}

void
Telemetry::CountParkedLeaked(int32_t device, size_t n)
{
  std::lock_guard<std::mutex> lock(mu_);
  TRITONSERVER_Metric*& metric = leaked_[device];
  if (metric == nullptr) {
    metric = NewMetric(leaked_family_, {{"device", std::to_string(device)}});
  }
  Add(metric, static_cast<double>(n), "npu_ge_parked_leaked_total");
}

void
TelemetryRegistration::CountDeviceError(int32_t code)
{
  if (owner_ != nullptr) owner_->CountDeviceError(device_, code);
}

void
Telemetry::CountDeviceError(int32_t device, int32_t code)
{
  std::lock_guard<std::mutex> lock(mu_);
  TRITONSERVER_Metric*& metric = device_errors_[{device, code}];
  if (metric == nullptr) {
    metric = NewMetric(
        device_errors_family_,
        {{"device", std::to_string(device)}, {"code", std::to_string(code)}});
  }
  Add(metric, 1, "npu_ge_device_errors_total");
}

Telemetry::Telemetry(int64_t interval_ms) : interval_ms_(interval_ms)
{
  struct FamilySpec {
    TRITONSERVER_MetricFamily** family;
    TRITONSERVER_MetricKind kind;
    const char* name;
    const char* help;
  };
  constexpr TRITONSERVER_MetricKind kGauge = TRITONSERVER_METRIC_KIND_GAUGE;
  const FamilySpec specs[] = {
      {&utilization_family_, kGauge, "npu_ge_device_utilization",
       "AI Core (cube) utilization of the NPU, percent"},
      {&hbm_used_family_, kGauge, "npu_ge_hbm_used_bytes",
       "HBM in use on the NPU, bytes"},
      {&hbm_total_family_, kGauge, "npu_ge_hbm_total_bytes",
       "HBM capacity of the NPU, bytes"},
      {&placement_family_, kGauge, "npu_ge_instance_device",
       "1 for each npu_ge model instance, labelled with the NPU it runs on"},
      {&recoveries_family_, TRITONSERVER_METRIC_KIND_COUNTER,
       "npu_ge_instance_recoveries_total",
       "Times an npu_ge instance rebuilt its context, stream and buffers after a "
       "device error or an execution longer than execute_timeout_ms"},
      {&overflows_family_, TRITONSERVER_METRIC_KIND_COUNTER,
       "npu_ge_execution_overflows_total",
       "Executions of an npu_ge instance whose stream synchronize returned an "
       "overflow-type status code (CANN logs these as a successful synchronize); "
       "their requests were answered"},
      {&broken_family_, kGauge, "npu_ge_instance_broken",
       "1 once an npu_ge instance can never execute again (lost device, or "
       "executions nothing could stop): it fails every request with the reason"},
      {&device_lost_family_, TRITONSERVER_METRIC_KIND_COUNTER, "npu_ge_device_lost_total",
       "Waits of an npu_ge instance that failed with a device-lost class of ACL error"},
      {&parked_family_, kGauge, "npu_ge_parked_executions",
       "Executions abandoned to a stream destroyed by force whose buffers, model and "
       "context an npu_ge instance keeps allocated until the model is unloaded"},
      {&leaked_family_, TRITONSERVER_METRIC_KIND_COUNTER, "npu_ge_parked_leaked_total",
       "Parked executions left allocated for the rest of the process at unload: no "
       "bounded device synchronize confirmed that they ended"},
      {&held_family_, kGauge, "npu_ge_instance_held_requests",
       "Requests an npu_ge instance took from Triton and holds until its device "
       "finished the execution before (copy_overlap); Triton counts their wait in "
       "compute_input, not in its queue"},
      {&polls_family_, TRITONSERVER_METRIC_KIND_COUNTER, "npu_ge_telemetry_polls_total",
       "Polls of npu_ge's NPU telemetry thread, each over every device with an "
       "instance"},
      {&device_errors_family_, TRITONSERVER_METRIC_KIND_COUNTER,
       "npu_ge_device_errors_total",
       "Failed npu_ge executions whose ACL error (code, decimal) means the NPU or its "
       "memory is bad: lost device, memory or HBM ECC, AI Core or vector core "
       "exception, link error"},
  };
  enabled_ = true;
  for (const FamilySpec& s : specs) {
    TRITONSERVER_Error* err =
        TRITONSERVER_MetricFamilyNew(s.family, s.kind, s.name, s.help);
    if (err != nullptr) {
      NPU_GE_LOG(
          WARN, "NPU telemetry disabled: cannot create metric family "
                    << s.name << ": " << TRITONSERVER_ErrorMessage(err));
      TRITONSERVER_ErrorDelete(err);
      enabled_ = false;
      break;
    }
  }
  if (enabled_) polls_ = NewMetric(polls_family_, {});
}

Telemetry::~Telemetry()
{
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& kv : devices_) {  // only left when registrations leaked
    DeleteMetric(kv.second.utilization);
    DeleteMetric(kv.second.hbm_used);
    DeleteMetric(kv.second.hbm_total);
  }
  for (auto& kv : leaked_) DeleteMetric(kv.second);
  for (auto& kv : device_errors_) DeleteMetric(kv.second);
  DeleteMetric(polls_);
  for (TRITONSERVER_MetricFamily* f :
       {utilization_family_, hbm_used_family_, hbm_total_family_, placement_family_,
        recoveries_family_, overflows_family_, broken_family_, device_lost_family_,
        parked_family_, leaked_family_, device_errors_family_, held_family_,
        polls_family_}) {
    if (f != nullptr) {
      LogAndDelete(TRITONSERVER_MetricFamilyDelete(f), "cannot delete metric family");
    }
  }
}

TRITONSERVER_Metric*
Telemetry::NewMetric(
    TRITONSERVER_MetricFamily* family,
    const std::vector<std::pair<std::string, std::string>>& labels)
{
  std::vector<const TRITONSERVER_Parameter*> params;
  for (const auto& kv : labels) {
    params.push_back(TRITONSERVER_ParameterNew(
        kv.first.c_str(), TRITONSERVER_PARAMETER_STRING, kv.second.c_str()));
  }
  TRITONSERVER_Metric* metric = nullptr;
  TRITONSERVER_Error* err =
      TRITONSERVER_MetricNew(&metric, family, params.data(), params.size());
  for (const TRITONSERVER_Parameter* p : params) {
    TRITONSERVER_ParameterDelete(const_cast<TRITONSERVER_Parameter*>(p));
  }
  if (err != nullptr) {
    LogAndDelete(err, "cannot create NPU metric");
    return nullptr;
  }
  return metric;
}

void
Telemetry::DeleteMetric(TRITONSERVER_Metric* metric)
{
  if (metric != nullptr) {
    LogAndDelete(TRITONSERVER_MetricDelete(metric), "cannot delete NPU metric");
  }
}

std::unique_ptr<TelemetryRegistration>
Telemetry::Register(
    const std::shared_ptr<AclRuntime>& rt, const std::string& model, uint64_t version,
    const std::string& instance, int32_t device)
{
  std::unique_ptr<TelemetryRegistration> reg(new TelemetryRegistration());
  if (!enabled_) return reg;
  const std::string dev = std::to_string(device);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (runtime_ == nullptr) runtime_ = rt;
    DeviceGauges& g = devices_[device];
    ++g.refs;  // the device gauges appear with their first known value
    reg->owner_ = this;
    reg->device_ = device;
    reg->placement_ = NewMetric(
        placement_family_, {{"model", model},
                            {"version", std::to_string(version)},
                            {"instance", instance},
                            {"device", dev}});
    if (reg->placement_ != nullptr) {
      TRITONSERVER_Error* err = TRITONSERVER_MetricSet(reg->placement_, 1);
      LogAndDelete(err, "cannot set npu_ge_instance_device");
    }
    reg->recoveries_ = NewMetric(
        recoveries_family_,
        {{"model", model}, {"version", std::to_string(version)}, {"instance", instance}});
    const std::vector<std::pair<std::string, std::string>> labels = {
        {"model", model}, {"version", std::to_string(version)}, {"instance", instance}};
    reg->overflows_ = NewMetric(overflows_family_, labels);
    reg->broken_ = NewMetric(broken_family_, labels);
    reg->device_lost_ = NewMetric(device_lost_family_, labels);
    reg->parked_ = NewMetric(parked_family_, labels);
    reg->held_ = NewMetric(held_family_, labels);
    Set(reg->broken_, 0, "npu_ge_instance_broken");
    Set(reg->parked_, 0, "npu_ge_parked_executions");
    Set(reg->held_, 0, "npu_ge_instance_held_requests");
    poll_now_ = true;
    if (!thread_.joinable()) thread_ = std::thread(&Telemetry::Loop, this);
  }
  cv_.notify_all();
  return reg;
}

void
Telemetry::Unregister(TelemetryRegistration* reg)
{
  std::lock_guard<std::mutex> lock(mu_);
  DeleteMetric(reg->placement_);
  DeleteMetric(reg->recoveries_);
  DeleteMetric(reg->overflows_);
  DeleteMetric(reg->broken_);
  DeleteMetric(reg->device_lost_);
  DeleteMetric(reg->parked_);
  DeleteMetric(reg->held_);
  auto it = devices_.find(reg->device_);
  if (it != devices_.end() && --it->second.refs == 0) {
    DeleteMetric(it->second.utilization);
    DeleteMetric(it->second.hbm_used);
    DeleteMetric(it->second.hbm_total);
    devices_.erase(it);
  }
}

void
Telemetry::Loop()
{
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(interval_ms_), [this] {
      return stop_ || poll_now_;
    });
    if (stop_) break;
    poll_now_ = false;
    for (auto& kv : devices_) PollLocked(kv.first, &kv.second);
    Add(polls_, 1, "npu_ge_telemetry_polls_total");
  }
}

// Sets `*metric` to `value` when the value is known, creating the gauge on
// first use; removes the gauge when the value is unknown, so an unknown value
// is absent from /metrics, never published as 0.
void
Telemetry::Publish(
    TRITONSERVER_MetricFamily* family, int32_t device, bool known, double value,
    TRITONSERVER_Metric** metric)
{
  if (!known) {
    DeleteMetric(*metric);
    *metric = nullptr;
    return;
  }
  if (*metric == nullptr)
    *metric = NewMetric(family, {{"device", std::to_string(device)}});
  if (*metric != nullptr) {
    LogAndDelete(TRITONSERVER_MetricSet(*metric, value), "cannot set NPU metric");
  }
}

void
Telemetry::PollLocked(int32_t device, DeviceGauges* g)
{
  const AclRuntime& rt = *runtime_;
  if (rt.aclrtGetDeviceUtilizationRate == nullptr && rt.aclrtGetMemInfo == nullptr) {
    return;  // an older CANN: nothing to read (logged once when ACL was opened)
  }
  aclrtUtilizationInfo util{};
  size_t free_bytes = 0, total_bytes = 0;
  bool util_known = false, mem_known = false;
  const char* failed = nullptr;
  aclError rc = rt.aclrtSetDevice(device);
  if (rc != ACL_SUCCESS) {
    failed = "aclrtSetDevice";
  } else {
    if (rt.aclrtGetDeviceUtilizationRate != nullptr) {  // optional symbol
      rc = rt.aclrtGetDeviceUtilizationRate(device, &util);
      util_known = rc == ACL_SUCCESS && util.cubeUtilization >= 0;
      if (rc != ACL_SUCCESS) failed = "aclrtGetDeviceUtilizationRate";
    }
    if (rt.aclrtGetMemInfo != nullptr) {  // optional symbol
      aclError mem_rc = rt.aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total_bytes);
      mem_known = mem_rc == ACL_SUCCESS && total_bytes >= free_bytes;
      if (mem_rc != ACL_SUCCESS && failed == nullptr) {
        failed = "aclrtGetMemInfo";
        rc = mem_rc;
      }
    }
    LogAclReleaseError(rt, "aclrtResetDevice", rt.aclrtResetDevice(device));
  }
  if (failed != nullptr && !g->warned) {  // once per device, not every poll
    LogAndDelete(AclError(rt, failed, rc), "NPU telemetry poll failed");
    g->warned = true;
  }
  Publish(utilization_family_, device, util_known, util.cubeUtilization, &g->utilization);
  Publish(
      hbm_used_family_, device, mem_known, static_cast<double>(total_bytes - free_bytes),
      &g->hbm_used);
  Publish(
      hbm_total_family_, device, mem_known, static_cast<double>(total_bytes),
      &g->hbm_total);
}

}  // namespace npu_ge
