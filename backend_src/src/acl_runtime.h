// The ACL runtime, opened with dlopen when the first model that needs it
// loads: libascendcl.so for the runtime (acl*, aclrt*) and, where CANN 9's
// split layout ships it beside libascendcl.so, libacl_mdl.so for the model
// API (aclmdl*; libascendcl.so otherwise, as CANN 8 keeps it there). A host
// without CANN gets a model-load error naming what was looked for and where;
// the server and every other model keep running. Function pointer types come
// from the real CANN headers, so a signature mismatch is a compile error.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "acl/acl.h"
#include "npu_ge/triton_api.h"

namespace npu_ge {

// Required: the core a model cannot be served without (init, device, context,
// stream, memory, model load/describe/execute, datasets). A library missing
// one fails the model load with an error naming the symbol.
// clang-format off
#define NPU_GE_ACL_REQUIRED_FUNCTIONS(X)                                    \
  X(aclInit) X(aclFinalize)                                                 \
  X(aclrtSetDevice) X(aclrtResetDevice) X(aclrtGetDeviceCount)              \
  X(aclrtCreateContext) X(aclrtDestroyContext) X(aclrtSetCurrentContext)    \
  X(aclrtCreateStream) X(aclrtDestroyStream) X(aclrtSynchronizeStream)      \
  X(aclrtMalloc) X(aclrtFree) X(aclrtMemcpy) X(aclrtMemcpyAsync)            \
  X(aclmdlLoadFromFile) X(aclmdlUnload)                                     \
  X(aclmdlCreateDesc) X(aclmdlDestroyDesc) X(aclmdlGetDesc)                 \
  X(aclmdlGetNumInputs) X(aclmdlGetNumOutputs)                              \
  X(aclmdlGetInputNameByIndex) X(aclmdlGetOutputNameByIndex)                \
  X(aclmdlGetInputDims) X(aclmdlGetOutputDims)                              \
  X(aclmdlGetInputDataType) X(aclmdlGetOutputDataType)                      \
  X(aclmdlGetInputSizeByIndex) X(aclmdlGetOutputSizeByIndex)                \
  X(aclmdlGetDynamicBatch) X(aclmdlSetDynamicBatchSize)                     \
  X(aclmdlCreateDataset) X(aclmdlDestroyDataset) X(aclmdlAddDatasetBuffer)  \
  X(aclCreateDataBuffer) X(aclDestroyDataBuffer)                            \
  X(aclmdlExecuteAsync)

// Optional: error detail, telemetry and sizes. A library missing one keeps
// serving; the feature is off (one log line when the runtime is opened) and
// the pointer stays null, so every use checks it.
#define NPU_GE_ACL_OPTIONAL_FUNCTIONS(X)                                    \
  X(aclGetRecentErrMsg, "error details from ACL")                           \
  X(aclrtGetMemInfo, "metrics npu_ge_hbm_used_bytes, npu_ge_hbm_total_bytes") \
  X(aclrtGetDeviceUtilizationRate, "metric npu_ge_device_utilization")      \
  X(aclmdlQuerySize, "model weight/workspace bytes in memory usage")        \
  X(aclrtMallocHost, "pinned host staging and asynchronous copies")        \
  X(aclrtFreeHost, "pinned host staging and asynchronous copies")          \
  X(aclrtSynchronizeStreamWithTimeout, "execute_timeout_ms")                \
  X(aclrtStreamAbort, "stopping a timed-out execution with aclrtStreamAbort") \
  X(aclrtDestroyStreamForce, "destroying a timed-out stream without waiting") \
  X(aclrtSynchronizeDeviceWithTimeout, "freeing parked executions at unload") \
  X(aclmdlGetInputDimsV2, "models with static-AIPP inputs")               \
  X(aclmdlGetInputDynamicGearCount, "models with dims gears")             \
  X(aclmdlGetInputDynamicDims, "models with dims gears")                   \
  X(aclmdlSetInputDynamicDims, "models with dims gears")                   \
  X(aclmdlGetDynamicHW, "models with image size gears")                    \
  X(aclmdlSetDynamicHWSize, "models with image size gears")                \
  X(aclmdlGetInputIndexByName, "models with dims or image size gears")     \
  X(aclmdlGetCurOutputDims, "models with dims or image size gears")
// clang-format on

class AclRuntime {
 public:
#define NPU_GE_DECLARE_FN(name, ...) decltype(&::name) name = nullptr;
  NPU_GE_ACL_REQUIRED_FUNCTIONS(NPU_GE_DECLARE_FN)
  NPU_GE_ACL_OPTIONAL_FUNCTIONS(NPU_GE_DECLARE_FN)
#undef NPU_GE_DECLARE_FN

  // Opens libascendcl.so from the first of: $ASCEND_HOME_PATH/lib64,
  // $ASCEND_TOOLKIT_HOME/lib64, the loader's search path (LD_LIBRARY_PATH,
  // ld.so.cache), /usr/local/Ascend/cann/lib64 (CANN 9's default root),
  // /usr/local/Ascend/ascend-toolkit/latest/lib64 (CANN 8's); then
  // libacl_mdl.so from the same directory when it is there. Resolves the
  // required and optional functions (aclmdl* from libacl_mdl.so first) and
  // calls aclInit once. A missing required function is an UNAVAILABLE error
  // naming it and the libraries it was looked for in; missing optional ones
  // are logged in one line.
  static TRITONSERVER_Error* Open(std::shared_ptr<AclRuntime>* runtime);

  ~AclRuntime();  // aclFinalize, only after a successful aclInit
  AclRuntime(const AclRuntime&) = delete;
  AclRuntime& operator=(const AclRuntime&) = delete;

  const std::string& library_path() const { return path_; }
  // libacl_mdl.so's path when the model API comes from it, else "".
  const std::string& model_library_path() const { return model_path_; }
  // Both aclrtMallocHost and aclrtFreeHost are there.
  bool has_pinned_host_memory() const
  {
    return aclrtMallocHost != nullptr && aclrtFreeHost != nullptr;
  }
  // aclrtStreamAbort or aclrtDestroyStreamForce is there: a stream whose
  // execution timed out can be released without waiting for it.
  bool can_stop_streams() const
  {
    return aclrtStreamAbort != nullptr || aclrtDestroyStreamForce != nullptr;
  }
  // aclGetRecentErrMsg(), or "" when ACL has nothing to add.
  std::string RecentErrorMessage() const;

 private:
  AclRuntime() = default;
  TRITONSERVER_Error* OpenLibraries();
  // `name` from the library that provides it (aclmdl*: libacl_mdl.so first).
  void* Symbol(const char* name) const;
  TRITONSERVER_Error* ResolveRequired();
  // The error for a required function no library exports, naming where it
  // was looked for.
  TRITONSERVER_Error* MissingRequired(const char* name) const;
  void ResolveOptional();
  void* handle_ = nullptr;        // libascendcl.so
  void* model_handle_ = nullptr;  // libacl_mdl.so, when found
  std::string model_path_;
  std::string model_not_found_;  // where libacl_mdl.so was looked for in vain
  bool initialized_ = false;     // aclInit succeeded: aclFinalize is owed
  std::string path_;
};

// Builds "<call> failed: ACL error <code>: <aclGetRecentErrMsg()>".
TRITONSERVER_Error* AclError(const AclRuntime& rt, const char* call, aclError code);

}  // namespace npu_ge
