// State shared by every model of the npu_ge backend: the backend
// configuration (--backend-config=npu_ge,...), the lazily opened ACL runtime
// and the telemetry thread.
#pragma once

#include <memory>
#include <mutex>

#include "acl_runtime.h"
#include "ge_graph_engine.h"
#include "model_config.h"
#include "telemetry.h"

namespace npu_ge {

class BackendState {
 public:
  static TRITONSERVER_Error* Create(
      TRITONBACKEND_Backend* backend, std::unique_ptr<BackendState>* state);
  ~BackendState();

  const BackendConfigSpec& config() const { return config_; }
  Telemetry& telemetry() { return *telemetry_; }

  // The ACL runtime, opened on first use. Failure is returned to the model
  // being loaded (and retried by the next load), never fatal to the server.
  TRITONSERVER_Error* Runtime(std::shared_ptr<AclRuntime>* runtime);
  // GE's process-wide state (engine ge_graph), made with `make_port` by the
  // first caller; finalized (GEFinalize) before the ACL runtime.
  std::shared_ptr<GeGlobal> Ge(std::unique_ptr<GePort> (*make_port)());

 private:
  BackendState() = default;
  BackendConfigSpec config_;
  std::mutex mu_;
  std::shared_ptr<AclRuntime> runtime_;
  std::shared_ptr<GeGlobal> ge_;
  std::unique_ptr<Telemetry> telemetry_;
};

}  // namespace npu_ge
