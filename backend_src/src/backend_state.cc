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
  std::string json;
  NPU_GE_RETURN_IF_ERROR(MessageToJson(raw, &json));
  JsonValue config;
  std::string parse_error;
  if (!JsonValue::Parse(json, &config, &parse_error)) {
    return NPU_GE_ERROR(INTERNAL, "cannot parse the backend config: " << parse_error);
  }
  NPU_GE_RETURN_IF_ERROR(ParseBackendConfig(config, &s->config_));
  s->telemetry_.reset(new Telemetry(s->config_.telemetry_interval_ms));
  *state = std::move(s);
  return nullptr;
}

BackendState::~BackendState()
{
  telemetry_.reset();  // joins the polling thread before ACL goes away
  runtime_.reset();    // aclFinalize once the last model released it
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
