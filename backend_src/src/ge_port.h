// The GE online graph API as the GE graph engine needs it: a small port so the
// engine's logic is unit-tested with a fake, and only ge_port_cann.cc (built
// with the CANN toolkit, NPU_GE_WITH_GE_GRAPH=ON) touches GE itself.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model_config.h"
#include "npu_ge/triton_api.h"

namespace npu_ge {

using GeOptions = std::map<std::string, std::string>;

class GePort {
 public:
  virtual ~GePort() = default;
  // ge::GEInitialize with process-wide options (once per process).
  virtual TRITONSERVER_Error* Initialize(const GeOptions& global) = 0;
  // Parses the model file (ONNX) and reports its inputs and outputs.
  virtual TRITONSERVER_Error* Describe(const std::string& path, ModelIoDesc* io) = 0;
  // A session on one device with the graph parsed, compiled and loaded.
  virtual TRITONSERVER_Error* OpenSession(
      const std::string& path, const GeOptions& session, const GeOptions& graph,
      uint64_t* session_id) = 0;
  // Runs the loaded graph on host buffers (inputs/outputs in model order).
  virtual TRITONSERVER_Error* Run(
      uint64_t session_id, const std::vector<const void*>& inputs,
      const std::vector<size_t>& input_bytes, const std::vector<void*>& outputs,
      const std::vector<size_t>& output_bytes) = 0;
  virtual void CloseSession(uint64_t session_id) = 0;
};

// The real port (ge_port_cann.cc); only in toolkit builds.
std::unique_ptr<GePort> NewCannGePort();

}  // namespace npu_ge
