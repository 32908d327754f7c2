#include "acl_utils.h"

#include <cstdlib>

namespace npu_ge {

void
LogAclReleaseError(const AclRuntime& rt, const char* call, aclError rc)
{
  if (rc != ACL_SUCCESS) {
    LogAndDelete(AclError(rt, call, rc), "failed to release a device resource");
  }
}

// ---- releases -----------------------------------------------------------------
void
DeviceRefTraits::Release(const AclRuntime& rt, int32_t device)
{
  LogAclReleaseError(rt, "aclrtResetDevice", rt.aclrtResetDevice(device));
}

void
ContextTraits::Release(const AclRuntime& rt, aclrtContext ctx)
{
  LogAclReleaseError(rt, "aclrtDestroyContext", rt.aclrtDestroyContext(ctx));
}

void
StreamTraits::Release(const AclRuntime& rt, aclrtStream stream)
{
  LogAclReleaseError(rt, "aclrtDestroyStream", rt.aclrtDestroyStream(stream));
}

void
DeviceMemoryTraits::Release(const AclRuntime& rt, const DeviceMemory& mem)
{
  LogAclReleaseError(rt, "aclrtFree", rt.aclrtFree(mem.ptr));
}

void
HostMemoryTraits::Release(const AclRuntime& rt, const HostMemory& mem)
{
  if (mem.pinned) {
    LogAclReleaseError(rt, "aclrtFreeHost", rt.aclrtFreeHost(mem.ptr));
  } else {
    std::free(mem.ptr);
  }
}

void
ModelTraits::Release(const AclRuntime& rt, uint32_t id)
{
  LogAclReleaseError(rt, "aclmdlUnload", rt.aclmdlUnload(id));
}

void
ModelDescTraits::Release(const AclRuntime& rt, aclmdlDesc* desc)
{
  LogAclReleaseError(rt, "aclmdlDestroyDesc", rt.aclmdlDestroyDesc(desc));
}

void
DatasetTraits::Release(const AclRuntime& rt, const DatasetHandle& ds)
{
  LogAclReleaseError(rt, "aclmdlDestroyDataset", rt.aclmdlDestroyDataset(ds.dataset));
  for (aclDataBuffer* buf : ds.buffers) {
    LogAclReleaseError(rt, "aclDestroyDataBuffer", rt.aclDestroyDataBuffer(buf));
  }
}

// ---- creation -----------------------------------------------------------------
TRITONSERVER_Error*
DeviceRef::Acquire(const AclRuntime* rt, int32_t device, DeviceRef* out)
{
  out->Reset();
  NPU_GE_RETURN_IF_ACL_ERROR(*rt, aclrtSetDevice(device));
  out->Own(rt, device);
  return nullptr;
}

TRITONSERVER_Error*
ContextOwner::Create(const AclRuntime* rt, int32_t device, ContextOwner* out)
{
  out->Reset();
  aclrtContext ctx = nullptr;
  NPU_GE_RETURN_IF_ACL_ERROR(*rt, aclrtCreateContext(&ctx, device));
  out->Own(rt, ctx);
  return nullptr;
}

TRITONSERVER_Error*
ContextOwner::MakeCurrent() const
{
  NPU_GE_RETURN_IF_ACL_ERROR(*runtime(), aclrtSetCurrentContext(handle()));
  return nullptr;
}

TRITONSERVER_Error*
StreamOwner::Create(const AclRuntime* rt, StreamOwner* out)
{
  out->Reset();
  aclrtStream stream = nullptr;
  NPU_GE_RETURN_IF_ACL_ERROR(*rt, aclrtCreateStream(&stream));
  out->Own(rt, stream);
  return nullptr;
}

TRITONSERVER_Error*
DeviceBuffer::Allocate(const AclRuntime* rt, size_t size, DeviceBuffer* out)
{
  out->Reset();
  void* ptr = nullptr;
  NPU_GE_RETURN_IF_ACL_ERROR(
      *rt, aclrtMalloc(&ptr, size == 0 ? 1 : size, ACL_MEM_MALLOC_HUGE_FIRST));
  out->Own(rt, DeviceMemory{ptr, size});
  return nullptr;
}

TRITONSERVER_Error*
HostBuffer::Allocate(const AclRuntime* rt, size_t size, bool pinned, HostBuffer* out)
{
  out->Reset();
  const size_t bytes = size == 0 ? 1 : size;
  void* ptr = nullptr;
  if (pinned) {
    NPU_GE_RETURN_IF_ACL_ERROR(*rt, aclrtMallocHost(&ptr, bytes));
    std::memset(ptr, 0, bytes);
  } else {
    ptr = std::calloc(bytes, 1);
    if (ptr == nullptr) {
      return NPU_GE_ERROR(INTERNAL, "out of host memory for " << bytes << " bytes");
    }
  }
  out->Own(rt, HostMemory{static_cast<uint8_t*>(ptr), size, pinned});
  return nullptr;
}

TRITONSERVER_Error*
LoadedModel::Load(const AclRuntime* rt, const std::string& path, LoadedModel* out)
{
  out->Reset();
  uint32_t id = 0;
  NPU_GE_RETURN_IF_ACL_ERROR(*rt, aclmdlLoadFromFile(path.c_str(), &id));
  out->Own(rt, id);
  return nullptr;
}

TRITONSERVER_Error*
ModelDesc::FromModel(const AclRuntime* rt, const LoadedModel& model, ModelDesc* out)
{
  out->Reset();
  aclmdlDesc* desc = rt->aclmdlCreateDesc();
  if (desc == nullptr) {
    return AclError(*rt, "aclmdlCreateDesc", ACL_ERROR_BAD_ALLOC);
  }
  out->Own(rt, desc);
  NPU_GE_RETURN_IF_ACL_ERROR(*rt, aclmdlGetDesc(desc, model.id()));
  return nullptr;
}

TRITONSERVER_Error*
Dataset::Create(const AclRuntime* rt, Dataset* out)
{
  out->Reset();
  aclmdlDataset* ds = rt->aclmdlCreateDataset();
  if (ds == nullptr) {
    return AclError(*rt, "aclmdlCreateDataset", ACL_ERROR_BAD_ALLOC);
  }
  out->Own(rt, DatasetHandle{ds, {}});
  return nullptr;
}

TRITONSERVER_Error*
Dataset::AddBuffer(void* device_ptr, size_t size)
{
  const AclRuntime& rt = *runtime();
  aclDataBuffer* buf = rt.aclCreateDataBuffer(device_ptr, size);
  if (buf == nullptr) {
    return AclError(rt, "aclCreateDataBuffer", ACL_ERROR_BAD_ALLOC);
  }
  mutable_handle().buffers.push_back(buf);
  NPU_GE_RETURN_IF_ACL_ERROR(rt, aclmdlAddDatasetBuffer(handle().dataset, buf));
  return nullptr;
}

}  // namespace npu_ge
