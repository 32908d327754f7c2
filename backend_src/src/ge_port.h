// The GE online graph API as the GE graph engine needs it: a small port so the
// engine's logic is unit-tested with a fake, and only ge_port_cann.cc (built
// with the CANN toolkit, NPU_GE_WITH_GE_GRAPH=ON) touches GE itself.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model_config.h"
#include "npu_ge/triton_api.h"

namespace npu_ge {

using GeOptions = std::map<std::string, std::string>;

// One graph input or output as the graph is compiled: its ONNX name, data
// type and full dims (batch included).
struct GeTensorSpec {
  std::string name;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> dims;
  size_t ByteSize() const;
};

// The graph's inputs and outputs in the model's (ONNX graph) order. A dims
// entry of -1 is a dynamic batch dimension (compiled for a shape range).
struct GeGraphIo {
  std::vector<GeTensorSpec> inputs;
  std::vector<GeTensorSpec> outputs;
};

// One input of a run: host bytes with the shape they have (the compiled shape,
// the batch dimension set to the rows of this run).
struct GeRunInput {
  const void* data = nullptr;
  std::vector<int64_t> dims;
};

// One output of a finished run as GE returned it; `data` is valid only during
// the completion callback.
struct GeRunOutput {
  const void* data = nullptr;
  size_t bytes = 0;
  std::vector<int64_t> dims;
};

// Called once per accepted run, on any thread, at any time after RunAsync
// returned (also long after its caller stopped waiting): `error` (owned by the
// callee) or the outputs in the order of GeGraphIo.outputs.
using GeRunDone = std::function<void(
    TRITONSERVER_Error* error, const std::vector<GeRunOutput>& outputs)>;

class GePort {
 public:
  virtual ~GePort() = default;
  // ge::GEInitialize with process-wide options. GeGlobal calls it once.
  virtual TRITONSERVER_Error* Initialize(const GeOptions& global) = 0;
  // A session on 'device' with the graph parsed, added and compiled for the
  // shapes and data types of 'io' (at model load, never on a request).
  // 'device_bytes' is the device memory the compiled graph holds (0 if GE
  // cannot tell).
  virtual TRITONSERVER_Error* OpenSession(
      const std::string& path, const GeOptions& session, const GeOptions& graph,
      const GeGraphIo& io, int32_t device, uint64_t* session_id,
      size_t* device_bytes) = 0;
  // Queues one run of the compiled graph (ge::Session::RunGraphAsync) with the
  // inputs in the order of 'io' given to OpenSession, and returns without
  // waiting for it. The input bytes are copied before it returns. An error
  // returned here means the run was not queued and `done` is never called;
  // otherwise `done` is called exactly once. A session is closed only once
  // its runs called `done`.
  virtual TRITONSERVER_Error* RunAsync(
      uint64_t session_id, const std::vector<GeRunInput>& inputs, GeRunDone done) = 0;
  virtual void CloseSession(uint64_t session_id) = 0;
  // ge::GEFinalize, after every session closed and before ACL is finalized.
  // GeGlobal calls it once, only after a successful Initialize.
  virtual void Finalize() = 0;
};

// The real port (ge_port_cann.cc); only in toolkit builds.
std::unique_ptr<GePort> NewCannGePort();

}  // namespace npu_ge
