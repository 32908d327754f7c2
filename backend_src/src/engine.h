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
