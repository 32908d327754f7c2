// The engine interface: what ModelState / ModelInstanceState need from the
// code that actually runs a compiled model. Two engines implement it: the ACL
// offline-model engine (.om, always built) and the GE graph engine (ONNX/TF
// compiled online by GE; built only with the CANN toolkit).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model_config.h"
#include "npu_ge/triton_api.h"

namespace npu_ge {

// One instance's share of an engine: one device, its context, stream and
// buffers preallocated for the largest execution. The instance thread fills
// the host input staging buffers, calls Run, and reads the output staging.
class EngineInstance {
 public:
  virtual ~EngineInstance() = default;

  // Host staging, indexed like the model configuration's inputs/outputs,
  // sized for binding().max_exec_rows rows.
  virtual uint8_t* InputStaging(size_t config_input) = 0;
  virtual const uint8_t* OutputStaging(size_t config_output) const = 0;

  // Copies 'exec_rows' rows of every input to the device, runs the model and
  // copies the outputs back. compute_start/end bracket the model execution.
  virtual TRITONSERVER_Error* Run(
      size_t exec_rows, uint64_t* compute_start_ns, uint64_t* compute_end_ns) = 0;

  // Device memory held by this instance (buffers + model), for reporting.
  virtual size_t DeviceBytes() const = 0;

  // ---- Pipelining (engines with more than one buffer set) -------------------
  // With two sets the instance gathers batch N+1 into one set while batch N
  // runs from the other, and answers batch N while N+1 runs. Launch queues
  // a set's copy-in, execution and copy-out and returns; Wait blocks until
  // that work finished (bounded by the model's execute_timeout_ms). Launch of
  // one set is only called once the previous set's Wait returned. The
  // defaults describe an engine without pipelining: one set, and Launch
  // runs the whole execution (Run) before it returns.
  virtual size_t BufferSets() const { return 1; }
  virtual uint8_t* SetInputStaging(size_t set, size_t config_input)
  {
    (void)set;
    return InputStaging(config_input);
  }
  virtual const uint8_t* SetOutputStaging(size_t set, size_t config_output) const
  {
    (void)set;
    return OutputStaging(config_output);
  }
  virtual TRITONSERVER_Error* Launch(
      size_t set, size_t exec_rows, uint64_t* compute_start_ns);
  virtual TRITONSERVER_Error* Wait(size_t set, uint64_t* compute_end_ns);

  // ---- Dims and image size gears (binding().shape_gears) ----------------------
  // The gear the next Launch of `set` runs (the request's shapes picked it).
  virtual void SelectShapeGear(size_t set, size_t gear)
  {
    (void)set;
    (void)gear;
  }
  // Full dims of config output `config_output` in the last execution of
  // `set`, when the engine learns them at run time; false otherwise.
  virtual bool OutputDims(
      size_t set, size_t config_output, std::vector<int64_t>* dims) const
  {
    (void)set;
    (void)config_output;
    (void)dims;
    return false;
  }

  // The status code (IsStatusSyncCode) the last successful Wait of `set`
  // returned with, 0 when none; reading clears it.
  virtual int32_t TakeSyncStatus(size_t set)
  {
    (void)set;
    return 0;
  }

  // ---- Recovery ---------------------------------------------------------------
  // True after a device error or timeout left the instance's device state
  // unusable. Recover rebuilds it (context, stream, model, buffers); it is
  // called only while no work of this instance is in flight, and invalidates
  // every staging pointer handed out before.
  virtual bool NeedsRecovery() const { return false; }
  virtual TRITONSERVER_Error* Recover() { return nullptr; }
  // Not empty once the instance can never execute again (a lost device, an
  // execution nothing could stop, too many parked ones): why. Any thread.
  virtual std::string OutOfService() const { return std::string(); }
  // A wait failed with a device-lost class of error (the next Recover puts
  // the instance out of service). Any thread.
  virtual bool DeviceLost() const { return false; }
  // The ACL codes of the device-class errors (device_errors.h) that failed
  // Launches and Waits returned since the last call, in order; reading
  // clears them. Empty for engines without ACL codes (ge_graph). Any thread.
  virtual std::vector<int32_t> TakeDeviceErrors() { return {}; }
  // Executions abandoned to a stream destroyed by force, whose resources
  // stay allocated until ReleaseParked.
  virtual size_t ParkedExecutions() const { return 0; }
  // Called once at finalize, before the instance is deleted: frees what was
  // parked after a bounded device synchronize, or leaves it allocated for
  // the rest of the process; returns how many executions were left so.
  virtual size_t ReleaseParked() { return 0; }

 private:
  uint64_t run_end_ns_ = 0;  // of the default Launch's Run
};

// The model-level part of an engine: the validated binding of the config
// onto the compiled model, and a factory for per-device instances.
class Engine {
 public:
  virtual ~Engine() = default;
  virtual const IoBinding& binding() const = 0;
  virtual TRITONSERVER_Error* CreateInstance(
      int32_t device, std::unique_ptr<EngineInstance>* instance) = 0;
};

uint64_t NowNs();  // steady_clock, as Triton's statistics expect

}  // namespace npu_ge
