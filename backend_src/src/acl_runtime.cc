#include "acl_runtime.h"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

#include "triton_utils.h"

namespace npu_ge {
namespace {

std::vector<std::string>
CandidatePaths()
{
  std::vector<std::string> paths;
  for (const char* var : {"ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"}) {
    const char* home = std::getenv(var);
    if (home != nullptr && home[0] != '\0') {
      paths.push_back(std::string(home) + "/lib64/libascendcl.so");
    }
  }
  paths.emplace_back("libascendcl.so");  // LD_LIBRARY_PATH, ld.so.cache
  return paths;
}

}  // namespace

TRITONSERVER_Error*
AclRuntime::Open(std::shared_ptr<AclRuntime>* runtime)
{
  std::unique_ptr<AclRuntime> rt(new AclRuntime());
  std::string tried;
  for (const std::string& path : CandidatePaths()) {
    rt->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (rt->handle_ != nullptr) {
      rt->path_ = path;
      break;
    }
    const char* why = dlerror();
    tried += "\n  " + path + ": " + (why != nullptr ? why : "not found");
  }
  if (rt->handle_ == nullptr) {
    return NPU_GE_ERROR(
        UNAVAILABLE,
        "cannot load the ACL runtime libascendcl.so (CANN toolkit). Install "
        "CANN and run 'source /usr/local/Ascend/ascend-toolkit/set_env.sh' "
        "before starting tritonserver, or set ASCEND_HOME_PATH to the toolkit "
        "directory, or add the directory holding libascendcl.so to "
        "LD_LIBRARY_PATH. Tried:"
            << tried);
  }
  NPU_GE_RETURN_IF_ERROR(rt->ResolveRequired());
  rt->ResolveOptional();
  aclError rc = rt->aclInit(nullptr);
  if (rc != ACL_SUCCESS && rc != ACL_ERROR_REPEAT_INITIALIZE) {
    return AclError(*rt, "aclInit", rc);  // initialized_ stays false: no aclFinalize
  }
  // Finalize only what this runtime initialized (REPEAT: someone else's aclInit).
  rt->initialized_ = rc == ACL_SUCCESS;
  NPU_GE_LOG(INFO, "loaded ACL runtime from " << rt->path_);
  runtime->reset(rt.release());
  return nullptr;
}

TRITONSERVER_Error*
AclRuntime::ResolveRequired()
{
#define NPU_GE_RESOLVE_REQUIRED(name)                                                 \
  name = reinterpret_cast<decltype(&::name)>(dlsym(handle_, #name));                  \
  if (name == nullptr) {                                                              \
    return NPU_GE_ERROR(                                                              \
        UNAVAILABLE, path_ << " does not export " #name                               \
                           << ", which npu_ge requires: this libascendcl.so is not "  \
                              "CANN 8.0 or later (npu_ge is built and documented "    \
                              "against the CANN 8.0 ACL API; see the per-call table " \
                              "in backend_src/README.md)");                           \
  }
  NPU_GE_ACL_REQUIRED_FUNCTIONS(NPU_GE_RESOLVE_REQUIRED)
#undef NPU_GE_RESOLVE_REQUIRED
  return nullptr;
}

void
AclRuntime::ResolveOptional()
{
  std::string missing;
#define NPU_GE_RESOLVE_OPTIONAL(name, feature)                                        \
  name = reinterpret_cast<decltype(&::name)>(dlsym(handle_, #name));                  \
  if (name == nullptr) {                                                              \
    missing += std::string(missing.empty() ? "" : "; ") + #name " (" feature " off)"; \
  }
  NPU_GE_ACL_OPTIONAL_FUNCTIONS(NPU_GE_RESOLVE_OPTIONAL)
#undef NPU_GE_RESOLVE_OPTIONAL
  if (!missing.empty()) {
    NPU_GE_LOG(
        WARN,
        "optional ACL functions missing from " << path_ << " (older CANN): " << missing);
  }
  if (!can_stop_streams() && aclrtSynchronizeStreamWithTimeout != nullptr) {
    NPU_GE_LOG(
        WARN, path_ << " has neither aclrtStreamAbort nor aclrtDestroyStreamForce: "
                       "after an execution timeout npu_ge waits once more for the "
                       "stream, at most min(execute_timeout_ms, 1000) ms "
                       "(aclrtDestroyStream would wait for ever); if it is "
                       "still busy, the instance leaves its stream, buffers and model "
                       "allocated and fails every request until the model is reloaded");
  }
}

AclRuntime::~AclRuntime()
{
  if (initialized_) {
    aclError rc = aclFinalize();
    if (rc != ACL_SUCCESS) {
      LogAndDelete(AclError(*this, "aclFinalize", rc), "ACL shutdown");
    }
  }
  // The library stays mapped: CANN keeps process-wide threads and state that
  // must not be unmapped under them.
}

std::string
AclRuntime::RecentErrorMessage() const
{
  if (aclGetRecentErrMsg == nullptr) return "";
  const char* msg = aclGetRecentErrMsg();
  return msg == nullptr ? "" : msg;
}

TRITONSERVER_Error*
AclError(const AclRuntime& rt, const char* call, aclError code)
{
  std::string detail = rt.RecentErrorMessage();
  return NPU_GE_ERROR(
      INTERNAL,
      call << " failed: ACL error " << code << (detail.empty() ? "" : ": ") << detail);
}

}  // namespace npu_ge
