// The TRITONBACKEND_* entry points of npu_ge, and nothing else. Each one
// converts between Triton's handles and the backend's state objects; the work
// lives in BackendState, ModelState and ModelInstanceState.
#include <exception>
#include <memory>
#include <string>

#include "backend_state.h"
#include "model_instance_state.h"
#include "model_state.h"
#include "triton_utils.h"

namespace {

// No C++ exception may cross into Triton: turn one into an error (the only
// realistic one is std::bad_alloc).
template <typename Body>
TRITONSERVER_Error*
Guarded(const char* entry_point, Body&& body) noexcept
{
  try {
    return body();
  }
  catch (const std::exception& e) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INTERNAL,
        (std::string("npu_ge ") + entry_point + ": " + e.what()).c_str());
  }
  catch (...) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INTERNAL,
        (std::string("npu_ge ") + entry_point + ": unknown exception").c_str());
  }
}

}  // namespace

using npu_ge::BackendState;
using npu_ge::ModelInstanceState;
using npu_ge::ModelState;

extern "C" {

// Triton calls this once when it loads libtriton_npu_ge.so.
TRITONSERVER_Error*
TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend)
{
  return Guarded("TRITONBACKEND_Initialize", [&]() -> TRITONSERVER_Error* {
    uint32_t major = 0, minor = 0;
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ApiVersion(&major, &minor));
    if (major != NPU_GE_TRITONBACKEND_API_VERSION_MAJOR ||
        minor < NPU_GE_TRITONBACKEND_API_VERSION_MINOR) {
      return NPU_GE_ERROR(
          UNSUPPORTED, "npu_ge needs TRITONBACKEND API "
                           << NPU_GE_TRITONBACKEND_API_VERSION_MAJOR << "."
                           << NPU_GE_TRITONBACKEND_API_VERSION_MINOR
                           << " or a later 1.x; this Triton provides " << major << "."
                           << minor);
    }
    std::unique_ptr<BackendState> state;
    NPU_GE_RETURN_IF_ERROR(BackendState::Create(backend, &state));
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_BackendSetState(backend, state.get()));
    state.release();
    NPU_GE_LOG(
        INFO, "backend initialized (TRITONBACKEND API " << major << "." << minor << ")");
    return nullptr;
  });
}

// Triton calls this once at server shutdown, after every model is finalized.
TRITONSERVER_Error*
TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend)
{
  return Guarded("TRITONBACKEND_Finalize", [&]() -> TRITONSERVER_Error* {
    void* state = nullptr;
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_BackendState(backend, &state));
    delete static_cast<BackendState*>(state);
    return nullptr;
  });
}

// Triton calls this when a model using npu_ge loads (or reloads).
TRITONSERVER_Error*
TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model)
{
  return Guarded("TRITONBACKEND_ModelInitialize", [&]() -> TRITONSERVER_Error* {
    std::unique_ptr<ModelState> state;
    NPU_GE_RETURN_IF_ERROR(ModelState::Create(model, &state));
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelSetState(model, state.get()));
    state.release();
    return nullptr;
  });
}

// Triton calls this when a model unloads, and also after a failed
// ModelInitialize, in which case the state is null.
TRITONSERVER_Error*
TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model)
{
  return Guarded("TRITONBACKEND_ModelFinalize", [&]() -> TRITONSERVER_Error* {
    void* state = nullptr;
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &state));
    delete static_cast<ModelState*>(state);
    return nullptr;
  });
}

// Triton calls this for each instance in the model's instance_group.
TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance)
{
  return Guarded("TRITONBACKEND_ModelInstanceInitialize", [&]() -> TRITONSERVER_Error* {
    TRITONBACKEND_Model* model = nullptr;
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceModel(instance, &model));
    void* model_state = nullptr;
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &model_state));
    std::unique_ptr<ModelInstanceState> state;
    NPU_GE_RETURN_IF_ERROR(
        ModelInstanceState::Create(
            static_cast<ModelState*>(model_state), instance, &state));
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceSetState(instance, state.get()));
    state.release();
    return nullptr;
  });
}

// Triton calls this when an instance goes away (unload, reload, failed load);
// the state is null if ModelInstanceInitialize failed.
TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance)
{
  return Guarded("TRITONBACKEND_ModelInstanceFinalize", [&]() -> TRITONSERVER_Error* {
    void* state = nullptr;
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceState(instance, &state));
    delete static_cast<ModelInstanceState*>(state);
    return nullptr;
  });
}

// Triton calls this when its model-ready endpoint asks (Triton releases
// after 2.51 that have it; 2.51 never calls it): an instance whose device was
// lost, or that nothing could stop, is not ready. Declared here: the header
// holds Triton 2.51's API.
NPU_GE_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReady(
    TRITONBACKEND_ModelInstance* instance);
TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceReady(TRITONBACKEND_ModelInstance* instance)
{
  return Guarded("TRITONBACKEND_ModelInstanceReady", [&]() -> TRITONSERVER_Error* {
    void* state = nullptr;
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceState(instance, &state));
    if (state == nullptr) return nullptr;
    return static_cast<ModelInstanceState*>(state)->Ready();
  });
}

// Triton calls this with a batch of requests for one instance.
TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count)
{
  // On an error returned here Triton keeps ownership of the requests and
  // answers them; Execute returns one only before touching any request.
  return Guarded("TRITONBACKEND_ModelInstanceExecute", [&]() -> TRITONSERVER_Error* {
    void* state = nullptr;
    NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceState(instance, &state));
    return static_cast<ModelInstanceState*>(state)->Execute(requests, request_count);
  });
}

}  // extern "C"
