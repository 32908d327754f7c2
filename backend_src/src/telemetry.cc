#include "telemetry.h"

#include <chrono>
#include <vector>

#include "acl_utils.h"
#include "triton_utils.h"

namespace npu_ge {

TelemetryRegistration::~TelemetryRegistration()
{
  if (owner_ != nullptr) owner_->Unregister(this);
}

Telemetry::Telemetry(int64_t interval_ms) : interval_ms_(interval_ms)
{
  struct FamilySpec {
    TRITONSERVER_MetricFamily** family;
    const char* name;
    const char* help;
  };
  const FamilySpec specs[] = {
      {&utilization_family_, "npu_ge_device_utilization",
       "AI Core (cube) utilization of the NPU, percent"},
      {&hbm_used_family_, "npu_ge_hbm_used_bytes", "HBM in use on the NPU, bytes"},
      {&hbm_total_family_, "npu_ge_hbm_total_bytes", "HBM capacity of the NPU, bytes"},
      {&placement_family_, "npu_ge_instance_device",
       "1 for each npu_ge model instance, labelled with the NPU it runs on"},
  };
  enabled_ = true;
  for (const FamilySpec& s : specs) {
    TRITONSERVER_Error* err = TRITONSERVER_MetricFamilyNew(
        s.family, TRITONSERVER_METRIC_KIND_GAUGE, s.name, s.help);
    if (err != nullptr) {
      NPU_GE_LOG(
          WARN, "NPU telemetry disabled: cannot create metric family "
                    << s.name << ": " << TRITONSERVER_ErrorMessage(err));
      TRITONSERVER_ErrorDelete(err);
      enabled_ = false;
      break;
    }
  }
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
  for (TRITONSERVER_MetricFamily* f :
       {utilization_family_, hbm_used_family_, hbm_total_family_, placement_family_}) {
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
    if (g.refs++ == 0) {
      g.utilization = NewMetric(utilization_family_, {{"device", dev}});
      g.hbm_used = NewMetric(hbm_used_family_, {{"device", dev}});
      g.hbm_total = NewMetric(hbm_total_family_, {{"device", dev}});
    }
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
  }
}

void
Telemetry::PollLocked(int32_t device, DeviceGauges* g)
{
  const AclRuntime& rt = *runtime_;
  aclrtUtilizationInfo util{};
  size_t free_bytes = 0, total_bytes = 0;
  const char* failed = nullptr;
  aclError rc = rt.aclrtSetDevice(device);
  if (rc != ACL_SUCCESS) {
    failed = "aclrtSetDevice";
  } else {
    if ((rc = rt.aclrtGetDeviceUtilizationRate(device, &util)) != ACL_SUCCESS) {
      failed = "aclrtGetDeviceUtilizationRate";
    } else if (
        (rc = rt.aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total_bytes)) !=
        ACL_SUCCESS) {
      failed = "aclrtGetMemInfo";
    }
    LogAclReleaseError(rt, "aclrtResetDevice", rt.aclrtResetDevice(device));
  }
  if (failed != nullptr) {
    if (!g->warned) {  // once per device, not every poll
      LogAndDelete(AclError(rt, failed, rc), "NPU telemetry poll failed");
      g->warned = true;
    }
    return;
  }
  auto set = [](TRITONSERVER_Metric* m, double v) {
    if (m != nullptr) LogAndDelete(TRITONSERVER_MetricSet(m, v), "cannot set NPU metric");
  };
  set(g->utilization, util.cubeUtilization < 0 ? 0 : util.cubeUtilization);
  set(g->hbm_used, static_cast<double>(total_bytes - free_bytes));
  set(g->hbm_total, static_cast<double>(total_bytes));
}

}  // namespace npu_ge
