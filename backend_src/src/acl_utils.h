// ACL error macros and RAII owners for every device resource the backend
// creates: one template (AclHandle) releases each exactly once; the owners
// add only how the resource is created and read.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "acl_runtime.h"
#include "triton_utils.h"

namespace npu_ge {

// Extracts "aclrtMalloc" from "aclrtMalloc(&p, n, policy)".
inline std::string
AclCallName(const char* expr)
{
  const char* paren = std::strchr(expr, '(');
  return paren == nullptr ? std::string(expr) : std::string(expr, paren - expr);
}

// Runs RT.CALL(...); on failure returns a TRITONSERVER_Error* that keeps the
// ACL code, the failing call's name and aclGetRecentErrMsg().
#define NPU_GE_RETURN_IF_ACL_ERROR(RT, CALL)                            \
  do {                                                                  \
    aclError npu_ge_acl_rc__ = (RT).CALL;                               \
    if (npu_ge_acl_rc__ != ACL_SUCCESS) {                               \
      return ::npu_ge::AclError(                                        \
          (RT), ::npu_ge::AclCallName(#CALL).c_str(), npu_ge_acl_rc__); \
    }                                                                   \
  } while (false)

// nullptr when `rc` is ACL_SUCCESS, else the error for `call` (as above).
inline TRITONSERVER_Error*
AclCall(const AclRuntime& rt, const char* call, aclError rc)
{
  return rc == ACL_SUCCESS ? nullptr : AclError(rt, call, rc);
}

// Codes a stream synchronize returns that are a status, not a failure: CANN's
// runtime (hicann/runtime src/acl/aclrt_impl/stream.cpp) logs them as a
// successful synchronize. Of that list npu_ge takes only the overflow-type
// ones (AI Core, vector core, common overflow: the execution completed and
// wrote its outputs; overflow detection flagged a saturated or inf/nan
// value); end of sequence, normal model abort and a closed socket mean no
// outputs were produced and stay failures.
inline bool
IsStatusSyncCode(aclError rc)
{
  return rc == ACL_ERROR_RT_AICORE_OVER_FLOW || rc == ACL_ERROR_RT_AIVEC_OVER_FLOW ||
         rc == ACL_ERROR_RT_OVER_FLOW;
}

// Logs (never throws) a failure while releasing a resource.
void LogAclReleaseError(const AclRuntime& rt, const char* call, aclError rc);

// The one RAII owner of an ACL resource. `Traits` names the handle
// (`Traits::Handle`, empty when value-initialized) and its release
// (`Traits::Release(rt, handle)`, which logs a failure and never throws). The
// owner releases what it holds exactly once: in Reset, on move-assignment and
// in its destructor; a moved-from owner is empty. The caller makes the owning
// context current before a release, as CANN requires.
template <typename Traits>
class AclHandle {
 public:
  using Handle = typename Traits::Handle;
  AclHandle() = default;
  ~AclHandle() { Reset(); }
  AclHandle(AclHandle&& o) noexcept { *this = std::move(o); }
  AclHandle& operator=(AclHandle&& o) noexcept
  {
    if (this != &o) {
      Reset();
      rt_ = std::exchange(o.rt_, nullptr);
      handle_ = std::exchange(o.handle_, Handle{});
    }
    return *this;
  }
  AclHandle(const AclHandle&) = delete;
  AclHandle& operator=(const AclHandle&) = delete;

  void Reset()
  {
    if (rt_ != nullptr) Traits::Release(*rt_, handle_);
    Release();
  }
  // Forgets the resource without releasing it (a stream destroyed by force,
  // or resources left to a device that may still write into them).
  void Release()
  {
    rt_ = nullptr;
    handle_ = Handle{};
  }
  bool held() const { return rt_ != nullptr; }

 protected:
  // Takes `handle` (releasing what was held before).
  void Own(const AclRuntime* rt, Handle handle)
  {
    Reset();
    rt_ = rt;
    handle_ = std::move(handle);
  }
  const Handle& handle() const { return handle_; }
  Handle& mutable_handle() { return handle_; }
  const AclRuntime* runtime() const { return rt_; }

 private:
  const AclRuntime* rt_ = nullptr;  // set: a resource is held
  Handle handle_{};
};

// Traits of the owners below: the handle and the ACL call releasing it.
struct DeviceRefTraits {
  using Handle = int32_t;  // the device
  static void Release(const AclRuntime& rt, int32_t device);
};
struct ContextTraits {
  using Handle = aclrtContext;
  static void Release(const AclRuntime& rt, aclrtContext ctx);
};
struct StreamTraits {
  using Handle = aclrtStream;
  static void Release(const AclRuntime& rt, aclrtStream stream);
};
struct DeviceMemory {
  void* ptr = nullptr;
  size_t size = 0;
};
struct DeviceMemoryTraits {
  using Handle = DeviceMemory;
  static void Release(const AclRuntime& rt, const DeviceMemory& mem);
};
struct HostMemory {
  uint8_t* ptr = nullptr;
  size_t size = 0;
  bool pinned = false;  // aclrtMallocHost, else calloc
};
struct HostMemoryTraits {
  using Handle = HostMemory;
  static void Release(const AclRuntime& rt, const HostMemory& mem);
};
struct ModelTraits {
  using Handle = uint32_t;  // the model id
  static void Release(const AclRuntime& rt, uint32_t id);
};
struct ModelDescTraits {
  using Handle = aclmdlDesc*;
  static void Release(const AclRuntime& rt, aclmdlDesc* desc);
};
struct DatasetHandle {
  aclmdlDataset* dataset = nullptr;
  std::vector<aclDataBuffer*> buffers;  // ACL does not free them with the dataset
};
struct DatasetTraits {
  using Handle = DatasetHandle;
  static void Release(const AclRuntime& rt, const DatasetHandle& ds);
};

// A device reference taken with aclrtSetDevice, returned with aclrtResetDevice.
class DeviceRef : public AclHandle<DeviceRefTraits> {
 public:
  static TRITONSERVER_Error* Acquire(
      const AclRuntime* rt, int32_t device, DeviceRef* out);
};

class ContextOwner : public AclHandle<ContextTraits> {
 public:
  static TRITONSERVER_Error* Create(
      const AclRuntime* rt, int32_t device, ContextOwner* out);
  aclrtContext get() const { return handle(); }
  TRITONSERVER_Error* MakeCurrent() const;
};

// Reset is aclrtDestroyStream: it waits for the stream's unfinished work.
class StreamOwner : public AclHandle<StreamTraits> {
 public:
  static TRITONSERVER_Error* Create(const AclRuntime* rt, StreamOwner* out);
  aclrtStream get() const { return handle(); }
};

class DeviceBuffer : public AclHandle<DeviceMemoryTraits> {
 public:
  static TRITONSERVER_Error* Allocate(
      const AclRuntime* rt, size_t size, DeviceBuffer* out);
  void* get() const { return handle().ptr; }
  size_t size() const { return handle().size; }
};

// Host staging memory: pinned (aclrtMallocHost / aclrtFreeHost) when asked
// for, else pageable (zeroed malloc). Pinned memory is what asynchronous
// copies need; pageable memory is only copied with the synchronous
// aclrtMemcpy.
class HostBuffer : public AclHandle<HostMemoryTraits> {
 public:
  static TRITONSERVER_Error* Allocate(
      const AclRuntime* rt, size_t size, bool pinned, HostBuffer* out);
  uint8_t* data() const { return handle().ptr; }
  size_t size() const { return handle().size; }
};

// A model loaded on the current context (aclmdlLoadFromFile / aclmdlUnload).
class LoadedModel : public AclHandle<ModelTraits> {
 public:
  static TRITONSERVER_Error* Load(
      const AclRuntime* rt, const std::string& path, LoadedModel* out);
  uint32_t id() const { return handle(); }
};

// aclmdlDesc owner, filled from a loaded model with aclmdlGetDesc (the path
// CANN documents for every product; aclmdlGetDescFromFile is not supported on
// Atlas products before CANN 8.5).
class ModelDesc : public AclHandle<ModelDescTraits> {
 public:
  static TRITONSERVER_Error* FromModel(
      const AclRuntime* rt, const LoadedModel& model, ModelDesc* out);
  aclmdlDesc* get() const { return handle(); }
};

// An aclmdlDataset together with the aclDataBuffers it references.
class Dataset : public AclHandle<DatasetTraits> {
 public:
  static TRITONSERVER_Error* Create(const AclRuntime* rt, Dataset* out);
  TRITONSERVER_Error* AddBuffer(void* device_ptr, size_t size);
  aclmdlDataset* get() const { return handle().dataset; }
};

}  // namespace npu_ge
