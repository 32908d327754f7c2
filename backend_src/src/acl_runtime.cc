#include "acl_runtime.h"

#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "triton_utils.h"

namespace npu_ge {
namespace {

constexpr const char* kRuntimeLibrary = "libascendcl.so";
constexpr const char* kModelLibrary = "libacl_mdl.so";  // CANN 9: acl/acl_mdl.h

// Directories searched for libascendcl.so, in order; "" is the loader's own
// search (LD_LIBRARY_PATH, ld.so.cache).
std::vector<std::string>
SearchDirectories()
{
  std::vector<std::string> dirs;
  for (const char* var : {"ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"}) {
    const char* home = std::getenv(var);
    if (home != nullptr && home[0] != '\0') dirs.push_back(std::string(home) + "/lib64");
  }
  dirs.emplace_back("");
  dirs.emplace_back("/usr/local/Ascend/cann/lib64");                   // CANN 9 default
  dirs.emplace_back("/usr/local/Ascend/ascend-toolkit/latest/lib64");  // CANN 8 default
  return dirs;
}

std::string
InDirectory(const std::string& dir, const char* library)
{
  return dir.empty() ? std::string(library) : dir + "/" + library;
}

// The directory `handle` was loaded from, or "" when the loader cannot say.
std::string
OriginOf(void* handle)
{
  char origin[PATH_MAX + 1] = {0};
  if (dlinfo(handle, RTLD_DI_ORIGIN, origin) != 0) return "";
  return origin;
}

bool
IsModelFunction(const char* name)
{
  return std::strncmp(name, "aclmdl", 6) == 0;
}

std::string
DlError()
{
  const char* why = dlerror();
  return why != nullptr ? why : "not found";
}

}  // namespace

TRITONSERVER_Error*
AclRuntime::Open(std::shared_ptr<AclRuntime>* runtime)
{
  std::unique_ptr<AclRuntime> rt(new AclRuntime());
  NPU_GE_RETURN_IF_ERROR(rt->OpenLibraries());
  NPU_GE_RETURN_IF_ERROR(rt->ResolveRequired());
  rt->ResolveOptional();
  aclError rc = rt->aclInit(nullptr);
  if (rc != ACL_SUCCESS && rc != ACL_ERROR_REPEAT_INITIALIZE) {
    return AclError(*rt, "aclInit", rc);  // initialized_ stays false: no aclFinalize
  }
  // Finalize only what this runtime initialized (REPEAT: someone else's aclInit).
  rt->initialized_ = rc == ACL_SUCCESS;
  NPU_GE_LOG(
      INFO, "loaded ACL runtime from "
                << rt->path_ << "; model API (aclmdl*) from "
                << (rt->model_handle_ != nullptr ? rt->model_path_ : rt->path_));
  runtime->reset(rt.release());
  return nullptr;
}

TRITONSERVER_Error*
AclRuntime::OpenLibraries()
{
  std::string tried;
  for (const std::string& dir : SearchDirectories()) {
    const std::string path = InDirectory(dir, kRuntimeLibrary);
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) {
      path_ = path;
      break;
    }
    tried += "\n  " + path + ": " + DlError();
  }
  if (handle_ == nullptr) {
    return NPU_GE_ERROR(
        UNAVAILABLE,
        "cannot load the ACL runtime libascendcl.so (CANN toolkit). Install "
        "CANN and source its set_env.sh before starting tritonserver ('source "
        "/usr/local/Ascend/cann/set_env.sh' for CANN 9, 'source "
        "/usr/local/Ascend/ascend-toolkit/set_env.sh' for CANN 8), or set "
        "ASCEND_HOME_PATH to the installation directory, or add the directory "
        "holding libascendcl.so to LD_LIBRARY_PATH. Tried:"
            << tried);
  }
  // The model library of the same installation: beside libascendcl.so, never
  // from another directory (a mix of two CANN versions).
  const std::string origin = OriginOf(handle_);
  if (origin.empty()) {
    model_not_found_ = "the directory of " + path_ + " is unknown";
    return nullptr;
  }
  model_path_ = origin + "/" + kModelLibrary;
  model_handle_ = dlopen(model_path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (model_handle_ == nullptr) {
    model_not_found_ = model_path_ + ": " + DlError();
    model_path_.clear();
  }
  if (path_.find('/') == std::string::npos) path_ = origin + "/" + path_;
  return nullptr;
}

void*
AclRuntime::Symbol(const char* name) const
{
  if (model_handle_ != nullptr && IsModelFunction(name)) {
    if (void* fn = dlsym(model_handle_, name)) return fn;
  }
  return dlsym(handle_, name);
}

TRITONSERVER_Error*
AclRuntime::ResolveRequired()
{
#define NPU_GE_RESOLVE_REQUIRED(name)                        \
  name = reinterpret_cast<decltype(&::name)>(Symbol(#name)); \
  if (name == nullptr) return MissingRequired(#name);
  NPU_GE_ACL_REQUIRED_FUNCTIONS(NPU_GE_RESOLVE_REQUIRED)
#undef NPU_GE_RESOLVE_REQUIRED
  return nullptr;
}

TRITONSERVER_Error*
AclRuntime::MissingRequired(const char* name) const
{
  if (!IsModelFunction(name)) {
    return NPU_GE_ERROR(
        UNAVAILABLE, path_ << " does not export " << name
                           << ", which npu_ge requires: this libascendcl.so is older "
                              "than CANN 8.0 (npu_ge is built and documented against "
                              "the CANN 8.0 ACL API; see the per-call table in "
                              "backend_src/README.md)");
  }
  std::string where;
  if (model_handle_ == nullptr) {
    where = path_ + " does not export it, and there is no libacl_mdl.so beside it (" +
            model_not_found_ + ")";
  } else {
    where = "neither " + model_path_ + " nor " + path_ + " exports it";
  }
  return NPU_GE_ERROR(
      UNAVAILABLE, "the ACL model function "
                       << name << ", which npu_ge requires, was not found: " << where
                       << ". CANN 9 keeps the model API in libacl_mdl.so "
                          "(libascendcl.so only for compatibility), CANN 8 in "
                          "libascendcl.so: ASCEND_HOME_PATH or LD_LIBRARY_PATH "
                          "must name one complete CANN installation (see the "
                          "per-call table in backend_src/README.md)");
}

void
AclRuntime::ResolveOptional()
{
  std::string missing;
#define NPU_GE_RESOLVE_OPTIONAL(name, feature)                                        \
  name = reinterpret_cast<decltype(&::name)>(Symbol(#name));                          \
  if (name == nullptr) {                                                              \
    missing += std::string(missing.empty() ? "" : "; ") + #name " (" feature " off)"; \
  }
  NPU_GE_ACL_OPTIONAL_FUNCTIONS(NPU_GE_RESOLVE_OPTIONAL)
#undef NPU_GE_RESOLVE_OPTIONAL
  if (!missing.empty()) {
    NPU_GE_LOG(
        WARN, "optional ACL functions missing from "
                  << path_ << (model_handle_ != nullptr ? " and " + model_path_ : "")
                  << " (older CANN): " << missing);
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
