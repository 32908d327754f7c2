// NPU telemetry published as Triton custom metrics. One backend thread polls
// every device that has at least one instance (aclrtGetDeviceUtilizationRate,
// aclrtGetMemInfo; both optional ACL symbols) and sets the gauges below. A
// value that cannot be read is absent (gauge removed), never reported as 0:
//   npu_ge_device_utilization{device}   AI Core (cube) utilization, percent
//   npu_ge_hbm_used_bytes{device}       HBM in use on the device
//   npu_ge_hbm_total_bytes{device}      HBM capacity of the device
//   npu_ge_instance_device{model,version,instance,device} = 1 per instance
//   npu_ge_instance_recoveries_total{model,version,instance} (counter) times
//       the instance rebuilt its device state after a device error or an
//       execution that outlived execute_timeout_ms
//   npu_ge_execution_overflows_total{model,version,instance} (counter)
//       executions whose stream synchronize returned an overflow-type status
//       code (answered, not failed: IsStatusSyncCode in acl_utils.h)
//   npu_ge_instance_broken{model,version,instance} 1 once the instance can
//       never execute again (lost device, unstoppable or too many abandoned
//       executions; it answers every request with the reason), else 0
//   npu_ge_device_lost_total{model,version,instance} (counter) waits that
//       failed with a device-lost class of error (acl_recovery.h)
//   npu_ge_parked_executions{model,version,instance} executions abandoned to
//       a stream destroyed by force whose buffers, staging, model and context
//       stay allocated until the model is unloaded
//   npu_ge_parked_leaked_total{device} (counter) parked executions left
//       allocated for the rest of the process at unload because no bounded
//       device synchronize confirmed they ended; kept until the server exits
//   npu_ge_instance_held_requests{model,version,instance} requests an
//       instance took from Triton and holds until its device finished the
//       execution before (copy_overlap); Triton counts them in compute_input,
//       not in its queue
//   npu_ge_telemetry_polls_total (counter) polls of the thread, each over
//       every device with an instance (a runtime without the optional
//       telemetry calls reads nothing, and the gauges above stay absent)
//   npu_ge_device_errors_total{device,code} (counter) failed executions
//       whose ACL error (decimal `code`) is a device-class error of the
//       table in device_errors.h (lost device, memory / HBM ECC, AI Core and
//       vector core exceptions, link); created at the first such error, kept
//       until the server exits (the device's history, not the instance's)
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "acl_runtime.h"
#include "npu_ge/triton_api.h"

namespace npu_ge {

class Telemetry;

// Held by a model instance: its placement metric and its device's polling.
class TelemetryRegistration {
 public:
  ~TelemetryRegistration();
  void CountRecovery();                 // npu_ge_instance_recoveries_total += 1
  void CountOverflow();                 // npu_ge_execution_overflows_total += 1
  void SetBroken();                     // npu_ge_instance_broken = 1
  void CountDeviceLost();               // npu_ge_device_lost_total += 1
  void SetParked(size_t n);             // npu_ge_parked_executions = n
  void CountParkedLeaked(size_t n);     // npu_ge_parked_leaked_total{device} += n
  void CountDeviceError(int32_t code);  // npu_ge_device_errors_total{device,code} += 1
  void SetHeld(size_t n);               // npu_ge_instance_held_requests = n
  TelemetryRegistration(const TelemetryRegistration&) = delete;
  TelemetryRegistration& operator=(const TelemetryRegistration&) = delete;

 private:
  friend class Telemetry;
  TelemetryRegistration() = default;
  Telemetry* owner_ = nullptr;
  int32_t device_ = -1;
  TRITONSERVER_Metric* placement_ = nullptr;
  TRITONSERVER_Metric* recoveries_ = nullptr;
  TRITONSERVER_Metric* overflows_ = nullptr;
  TRITONSERVER_Metric* broken_ = nullptr;
  TRITONSERVER_Metric* device_lost_ = nullptr;
  TRITONSERVER_Metric* parked_ = nullptr;
  TRITONSERVER_Metric* held_ = nullptr;
};

class Telemetry {
 public:
  // Creates the metric families. When Triton has metrics disabled the
  // families cannot be created: telemetry is then off (logged, not an error).
  explicit Telemetry(int64_t interval_ms);
  ~Telemetry();  // stops the thread, deletes metrics and families
  Telemetry(const Telemetry&) = delete;
  Telemetry& operator=(const Telemetry&) = delete;

  std::unique_ptr<TelemetryRegistration> Register(
      const std::shared_ptr<AclRuntime>& rt, const std::string& model, uint64_t version,
      const std::string& instance, int32_t device);

 private:
  friend class TelemetryRegistration;
  struct DeviceGauges {
    int refs = 0;
    bool warned = false;
    TRITONSERVER_Metric* utilization = nullptr;
    TRITONSERVER_Metric* hbm_used = nullptr;
    TRITONSERVER_Metric* hbm_total = nullptr;
  };
  void Unregister(TelemetryRegistration* reg);
  void CountParkedLeaked(int32_t device, size_t n);
  void CountDeviceError(int32_t device, int32_t code);
  void Loop();
  void PollLocked(int32_t device, DeviceGauges* gauges);
  void Publish(
      TRITONSERVER_MetricFamily* family, int32_t device, bool known, double value,
      TRITONSERVER_Metric** metric);
  TRITONSERVER_Metric* NewMetric(
      TRITONSERVER_MetricFamily* family,
      const std::vector<std::pair<std::string, std::string>>& labels);
  static void DeleteMetric(TRITONSERVER_Metric* metric);

  const int64_t interval_ms_;
  bool enabled_ = false;
  TRITONSERVER_MetricFamily* utilization_family_ = nullptr;
  TRITONSERVER_MetricFamily* hbm_used_family_ = nullptr;
  TRITONSERVER_MetricFamily* hbm_total_family_ = nullptr;
  TRITONSERVER_MetricFamily* placement_family_ = nullptr;
  TRITONSERVER_MetricFamily* recoveries_family_ = nullptr;
  TRITONSERVER_MetricFamily* overflows_family_ = nullptr;
  TRITONSERVER_MetricFamily* broken_family_ = nullptr;
  TRITONSERVER_MetricFamily* device_lost_family_ = nullptr;
  TRITONSERVER_MetricFamily* parked_family_ = nullptr;
  TRITONSERVER_MetricFamily* leaked_family_ = nullptr;
  TRITONSERVER_MetricFamily* device_errors_family_ = nullptr;
  TRITONSERVER_MetricFamily* held_family_ = nullptr;
  TRITONSERVER_MetricFamily* polls_family_ = nullptr;
  TRITONSERVER_Metric* polls_ = nullptr;  // no labels: one for the process

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool poll_now_ = false;
  std::shared_ptr<AclRuntime> runtime_;
  std::map<int32_t, DeviceGauges> devices_;
  std::map<int32_t, TRITONSERVER_Metric*> leaked_;  // per device, until exit
  // per (device, code), until exit
  std::map<std::pair<int32_t, int32_t>, TRITONSERVER_Metric*> device_errors_;
  std::thread thread_;
};

}  // namespace npu_ge
