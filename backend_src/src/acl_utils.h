// ACL error macros and RAII owners for every device resource the backend
// creates. Each owner releases its resource exactly once, in its destructor;
// the caller makes the owning context current before destruction.
#pragma once

#include <cstring>
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

// A device reference taken with aclrtSetDevice, returned with aclrtResetDevice.
class DeviceRef {
 public:
  DeviceRef() = default;
  static TRITONSERVER_Error* Acquire(
      const AclRuntime* rt, int32_t device, DeviceRef* out);
  ~DeviceRef() { Reset(); }
  DeviceRef(DeviceRef&& o) noexcept { *this = std::move(o); }
  DeviceRef& operator=(DeviceRef&& o) noexcept;
  void Reset();

 private:
  const AclRuntime* rt_ = nullptr;
  int32_t device_ = -1;
};

class ContextOwner {
 public:
  ContextOwner() = default;
  static TRITONSERVER_Error* Create(
      const AclRuntime* rt, int32_t device, ContextOwner* out);
  ~ContextOwner() { Reset(); }
  ContextOwner(ContextOwner&& o) noexcept { *this = std::move(o); }
  ContextOwner& operator=(ContextOwner&& o) noexcept;
  void Reset();
  aclrtContext get() const { return ctx_; }
  TRITONSERVER_Error* MakeCurrent() const;

 private:
  const AclRuntime* rt_ = nullptr;
  aclrtContext ctx_ = nullptr;
};

class StreamOwner {
 public:
  StreamOwner() = default;
  static TRITONSERVER_Error* Create(const AclRuntime* rt, StreamOwner* out);
  ~StreamOwner() { Reset(); }
  StreamOwner(StreamOwner&& o) noexcept { *this = std::move(o); }
  StreamOwner& operator=(StreamOwner&& o) noexcept;
  void Reset();  // aclrtDestroyStream: waits for the stream's unfinished work
  // Forgets the stream without destroying it (it was destroyed by force).
  void Release()
  {
    rt_ = nullptr;
    stream_ = nullptr;
  }
  aclrtStream get() const { return stream_; }

 private:
  const AclRuntime* rt_ = nullptr;
  aclrtStream stream_ = nullptr;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static TRITONSERVER_Error* Allocate(
      const AclRuntime* rt, size_t size, DeviceBuffer* out);
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  void Reset();
  void* get() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  const AclRuntime* rt_ = nullptr;
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

// Host staging memory: pinned (aclrtMallocHost / aclrtFreeHost) when asked
// for, else pageable (zeroed malloc). Pinned memory is what asynchronous
// copies need; pageable memory is only copied with the synchronous
// aclrtMemcpy.
class HostBuffer {
 public:
  HostBuffer() = default;
  static TRITONSERVER_Error* Allocate(
      const AclRuntime* rt, size_t size, bool pinned, HostBuffer* out);
  ~HostBuffer() { Reset(); }
  HostBuffer(HostBuffer&& o) noexcept { *this = std::move(o); }
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  void Reset();
  uint8_t* data() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  const AclRuntime* rt_ = nullptr;  // set: pinned
  uint8_t* ptr_ = nullptr;
  size_t size_ = 0;
};

// A model loaded on the current context (aclmdlLoadFromFile / aclmdlUnload).
class LoadedModel {
 public:
  LoadedModel() = default;
  static TRITONSERVER_Error* Load(
      const AclRuntime* rt, const std::string& path, LoadedModel* out);
  ~LoadedModel() { Reset(); }
  LoadedModel(LoadedModel&& o) noexcept { *this = std::move(o); }
  LoadedModel& operator=(LoadedModel&& o) noexcept;
  void Reset();
  uint32_t id() const { return id_; }

 private:
  const AclRuntime* rt_ = nullptr;
  uint32_t id_ = 0;
  bool loaded_ = false;
};

// aclmdlDesc owner, filled from a loaded model with aclmdlGetDesc (the path
// CANN documents for every product; aclmdlGetDescFromFile is not supported on
// Atlas products before CANN 8.5).
class ModelDesc {
 public:
  ModelDesc() = default;
  static TRITONSERVER_Error* FromModel(
      const AclRuntime* rt, const LoadedModel& model, ModelDesc* out);
  ~ModelDesc() { Reset(); }
  ModelDesc(ModelDesc&& o) noexcept { *this = std::move(o); }
  ModelDesc& operator=(ModelDesc&& o) noexcept;
  void Reset();
  aclmdlDesc* get() const { return desc_; }

 private:
  const AclRuntime* rt_ = nullptr;
  aclmdlDesc* desc_ = nullptr;
};

// An aclmdlDataset together with the aclDataBuffers it references (ACL does
// not free data buffers when the dataset is destroyed).
class Dataset {
 public:
  Dataset() = default;
  static TRITONSERVER_Error* Create(const AclRuntime* rt, Dataset* out);
  ~Dataset() { Reset(); }
  Dataset(Dataset&& o) noexcept { *this = std::move(o); }
  Dataset& operator=(Dataset&& o) noexcept;
  void Reset();
  TRITONSERVER_Error* AddBuffer(void* device_ptr, size_t size);
  aclmdlDataset* get() const { return dataset_; }

 private:
  const AclRuntime* rt_ = nullptr;
  aclmdlDataset* dataset_ = nullptr;
  std::vector<aclDataBuffer*> buffers_;
};

}  // namespace npu_ge
