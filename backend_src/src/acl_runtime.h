// The ACL runtime (libascendcl.so), opened with dlopen when the first model
// that needs it loads. A host without CANN gets a model-load error naming the
// missing library and the environment to set; the server and every other
// model keep running. Function pointer types come from the real CANN headers,
// so a signature mismatch is a compile error.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "acl/acl.h"
#include "npu_ge/triton_api.h"

namespace npu_ge {

// clang-format off
#define NPU_GE_ACL_FUNCTIONS(X)                                             \
  X(aclInit) X(aclFinalize) X(aclGetRecentErrMsg)                           \
  X(aclrtSetDevice) X(aclrtResetDevice) X(aclrtGetDeviceCount)              \
  X(aclrtCreateContext) X(aclrtDestroyContext) X(aclrtSetCurrentContext)    \
  X(aclrtCreateStream) X(aclrtDestroyStream) X(aclrtSynchronizeStream)      \
  X(aclrtMalloc) X(aclrtFree) X(aclrtMemcpy)                                \
  X(aclrtGetMemInfo) X(aclrtGetDeviceUtilizationRate)                       \
  X(aclmdlLoadFromFile) X(aclmdlUnload) X(aclmdlQuerySize)                  \
  X(aclmdlCreateDesc) X(aclmdlDestroyDesc) X(aclmdlGetDesc)                 \
  X(aclmdlGetDescFromFile) X(aclmdlGetNumInputs) X(aclmdlGetNumOutputs)     \
  X(aclmdlGetInputNameByIndex) X(aclmdlGetOutputNameByIndex)                \
  X(aclmdlGetInputDims) X(aclmdlGetOutputDims)                              \
  X(aclmdlGetInputDataType) X(aclmdlGetOutputDataType)                      \
  X(aclmdlGetInputSizeByIndex) X(aclmdlGetOutputSizeByIndex)                \
  X(aclmdlGetDynamicBatch) X(aclmdlSetDynamicBatchSize)                     \
  X(aclmdlCreateDataset) X(aclmdlDestroyDataset) X(aclmdlAddDatasetBuffer)  \
  X(aclCreateDataBuffer) X(aclDestroyDataBuffer)                            \
  X(aclmdlExecuteAsync)
// clang-format on

class AclRuntime {
 public:
#define NPU_GE_DECLARE_FN(name) decltype(&::name) name = nullptr;
  NPU_GE_ACL_FUNCTIONS(NPU_GE_DECLARE_FN)
#undef NPU_GE_DECLARE_FN

  // Opens libascendcl.so (ASCEND_HOME_PATH/lib64 first, then the loader's
  // search path), resolves every function and calls aclInit once.
  static TRITONSERVER_Error* Open(std::shared_ptr<AclRuntime>* runtime);

  ~AclRuntime();  // aclFinalize
  AclRuntime(const AclRuntime&) = delete;
  AclRuntime& operator=(const AclRuntime&) = delete;

  const std::string& library_path() const { return path_; }
  // aclGetRecentErrMsg(), or "" when ACL has nothing to add.
  std::string RecentErrorMessage() const;

 private:
  AclRuntime() = default;
  void* handle_ = nullptr;
  std::string path_;
};

// Builds "<call> failed: ACL error <code>: <aclGetRecentErrMsg()>".
TRITONSERVER_Error* AclError(const AclRuntime& rt, const char* call, aclError code);

}  // namespace npu_ge
