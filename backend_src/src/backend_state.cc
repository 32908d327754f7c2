#include "backend_state.h"

#include "triton_utils.h"

namespace npu_ge {

TRITONSERVER_Error*
BackendState::Create(TRITONBACKEND_Backend* backend, std::unique_ptr<BackendState>* state)
{
  std::unique_ptr<BackendState> s(new BackendState());
  TRITONSERVER_Message* raw = nullptr;
  NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_BackendConfig(backend, &raw));
  // The backend config message is owned by Triton: not deleted here.
  JsonValue config;
  NPU_GE_RETURN_IF_ERROR(ParseMessage(raw, "backend config", &config));
#ifdef NPU_GE_WITH_GE_GRAPH
  const bool have_ge_graph = true;
#else
  const bool have_ge_graph = false;
#endif
  NPU_GE_RETURN_IF_ERROR(ParseBackendConfig(config, &s->config_, have_ge_graph));
  for (const std::string& w : s->config_.warnings) NPU_GE_LOG(WARN, w);
  s->telemetry_.reset(new Telemetry(s->config_.telemetry_interval_ms));
  *state = std::move(s);
  return nullptr;
}

BackendState::~BackendState()
{
  telemetry_.reset();  // joins the polling thread before ACL goes away
  ge_.reset();         // GEFinalize (every model is gone: this was the last holder)
  runtime_.reset();    // aclFinalize once the last model released it
}

std::shared_ptr<GeGlobal>
BackendState::Ge(std::unique_ptr<GePort> (*make_port)())
{
  std::lock_guard<std::mutex> lock(mu_);
  if (ge_ == nullptr) {
    GeOptionSets scoped;
    scoped.session = config_.ge_session_options;
    scoped.graph = config_.ge_graph_options;
    ge_ = std::make_shared<GeGlobal>(make_port(), config_.ge_options, std::move(scoped));
  }
  return ge_;
}

TRITONSERVER_Error*
BackendState::Runtime(std::shared_ptr<AclRuntime>* runtime)
{
  std::lock_guard<std::mutex> lock(mu_);
  if (runtime_ == nullptr) {
    NPU_GE_RETURN_IF_ERROR(AclRuntime::Open(&runtime_));
  }
  *runtime = runtime_;
  return nullptr;
}

}  // namespace npu_ge
