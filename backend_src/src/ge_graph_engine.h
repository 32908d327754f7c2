// The GE graph engine: ONNX models compiled online by GE when the model loads.
// An ONNX graph whose inputs all have a symbolic batch dimension, served with
// max_batch_size > 0, is compiled for the shape range 1~max_batch_size and
// each batch runs with its own rows; otherwise graphs are compiled for a
// static batch of max_batch_size rows (smaller batches padded, padding never
// returned). Runs are asynchronous (GePort::RunAsync) and waited for at most
// execute_timeout_ms; a run that does not finish is abandoned, its session
// parked, and the instance compiles a new one. The config binds to the ONNX
// graph's own input/output names, data types and dims (read from the file).
// Options: "ge.*" parameters and --backend-config=npu_ge,ge.* are global GE
// options (GEInitialize, once per process), "session.<k>" session options and
// "graph.<k>" graph options (the scopes of the older Ascend GE backend).
#pragma once

#include <memory>
#include <mutex>

#include "engine.h"
#include "ge_port.h"

namespace npu_ge {

struct GeOptionSets {
  GeOptions global;
  GeOptions session;  // without the device entries, added per instance
  GeOptions graph;
};

// Splits model parameters into GE option scopes; unknown keys are errors. The
// graph option ge.inputShape is npu_ge's (the shapes it compiles for and sizes
// its buffers by): a 'graph.ge.inputShape' parameter must say the same, or
// the load fails naming both.
// `backend`: --backend-config's session.* / graph.* options, under the model's.
// `dynamic_batch`: the batch dimension is compiled as the range
// 1~max_batch_size ("x:1~8,4") instead of max_batch_size ("x:8,4").
TRITONSERVER_Error* BuildGeOptions(
    const ModelConfigSpec& spec, GeOptionSets* sets, const GeOptionSets& backend = {},
    bool dynamic_batch = false);

// GE's process-wide state. The first ge_graph model initializes GE with the
// backend's --backend-config ge.* options merged with its own ge.* options
// (and ge.graphRunMode=0, inference, unless one of them sets it).
// A later model's ge.* option is checked against what GE was initialized
// with: the same value is fine; a key GE was initialized without is merged
// into that model's session options (GE session options take ge.* keys);
// a different value is refused, naming both values and where each came from.
//
// GE is finalized (GEFinalize) when the last holder lets go: BackendState
// holds it and releases it before the ACL runtime (aclFinalize).
class GeGlobal {
 public:
  // backend_scoped: --backend-config's session.* / graph.* options (its
  // `global` part is unused: backend_options are the global ones).
  GeGlobal(
      std::shared_ptr<GePort> port, GeOptions backend_options,
      GeOptionSets backend_scoped = {});
  const GeOptionSets& backend_scoped() const { return backend_scoped_; }
  ~GeGlobal();  // GEFinalize, when GEInitialize succeeded
  GeGlobal(const GeGlobal&) = delete;
  GeGlobal& operator=(const GeGlobal&) = delete;
  GePort& port() { return *port_; }
  const std::shared_ptr<GePort>& shared_port() const { return port_; }

  TRITONSERVER_Error* Join(
      const std::string& model, const GeOptions& wanted, GeOptions* session_extra);

 private:
  std::shared_ptr<GePort> port_;
  const GeOptions backend_options_;
  const GeOptionSets backend_scoped_;
  std::mutex mu_;
  bool initialized_ = false;
  GeOptions options_;                          // what GEInitialize was given
  std::map<std::string, std::string> origin_;  // key -> who set it
};

// Creates the engine; 'ge' is shared by every ge_graph model of the process.
TRITONSERVER_Error* CreateGeGraphEngine(
    std::shared_ptr<GeGlobal> ge, const ModelConfigSpec& spec,
    const std::string& model_path, std::unique_ptr<Engine>* engine);

}  // namespace npu_ge
