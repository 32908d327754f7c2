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

// ---- DeviceRef --------------------------------------------------------------
TRITONSERVER_Error*
DeviceRef::Acquire(const AclRuntime* rt, int32_t device, DeviceRef* out)
{
  out->Reset();
  NPU_GE_RETURN_IF_ACL_ERROR(*rt, aclrtSetDevice(device));
  out->rt_ = rt;
  out->device_ = device;
  return nullptr;
}

DeviceRef&
DeviceRef::operator=(DeviceRef&& o) noexcept
{
  if (this != &o) {
    Reset();
    std::swap(rt_, o.rt_);
    std::swap(device_, o.device_);
  }
  return *this;
}

void
DeviceRef::Reset()
{
  if (rt_ != nullptr) {
    LogAclReleaseError(*rt_, "aclrtResetDevice", rt_->aclrtResetDevice(device_));
  }
  rt_ = nullptr;
  device_ = -1;
}

// ---- ContextOwner -------------------------------------------------------------
TRITONSERVER_Error*
ContextOwner::Create(const AclRuntime* rt, int32_t device, ContextOwner* out)
{
  out->Reset();
  aclrtContext ctx = nullptr;
  NPU_GE_RETURN_IF_ACL_ERROR(*rt, aclrtCreateContext(&ctx, device));
  out->rt_ = rt;
  out->ctx_ = ctx;
  return nullptr;
}

ContextOwner&
ContextOwner::operator=(ContextOwner&& o) noexcept
{
  if (this != &o) {
    Reset();
    std::swap(rt_, o.rt_);
    std::swap(ctx_, o.ctx_);
  }
  return *this;
}

void
ContextOwner::Reset()
{
  if (ctx_ != nullptr) {
    LogAclReleaseError(*rt_, "aclrtDestroyContext", rt_->aclrtDestroyContext(ctx_));
  }
  rt_ = nullptr;
  ctx_ = nullptr;
}

TRITONSERVER_Error*
ContextOwner::MakeCurrent() const
{
  NPU_GE_RETURN_IF_ACL_ERROR(*rt_, aclrtSetCurrentContext(ctx_));
  return nullptr;
}

// ---- StreamOwner --------------------------------------------------------------
TRITONSERVER_Error*
StreamOwner::Create(const AclRuntime* rt, StreamOwner* out)
{
  out->Reset();
  aclrtStream stream = nullptr;
  NPU_GE_RETURN_IF_ACL_ERROR(*rt, aclrtCreateStream(&stream));
  out->rt_ = rt;
  out->stream_ = stream;
  return nullptr;
}

StreamOwner&
StreamOwner::operator=(StreamOwner&& o) noexcept
{
  if (this != &o) {
    Reset();
    std::swap(rt_, o.rt_);
    std::swap(stream_, o.stream_);
  }
  return *this;
}

void
StreamOwner::Reset()
{
  if (stream_ != nullptr) {
    LogAclReleaseError(*rt_, "aclrtDestroyStream", rt_->aclrtDestroyStream(stream_));
  }
  rt_ = nullptr;
  stream_ = nullptr;
}

// ---- DeviceBuffer -------------------------------------------------------------
TRITONSERVER_Error*
DeviceBuffer::Allocate(const AclRuntime* rt, size_t size, DeviceBuffer* out)
{
  out->Reset();
  void* ptr = nullptr;
  NPU_GE_RETURN_IF_ACL_ERROR(
      *rt, aclrtMalloc(&ptr, size == 0 ? 1 : size, ACL_MEM_MALLOC_HUGE_FIRST));
  out->rt_ = rt;
  out->ptr_ = ptr;
  out->size_ = size;
  return nullptr;
}

DeviceBuffer&
DeviceBuffer::operator=(DeviceBuffer&& o) noexcept
{
  if (this != &o) {
    Reset();
    std::swap(rt_, o.rt_);
    std::swap(ptr_, o.ptr_);
    std::swap(size_, o.size_);
  }
  return *this;
}

void
DeviceBuffer::Reset()
{
  if (ptr_ != nullptr) {
    LogAclReleaseError(*rt_, "aclrtFree", rt_->aclrtFree(ptr_));
  }
  rt_ = nullptr;
  ptr_ = nullptr;
  size_ = 0;
}

// ---- HostBuffer ---------------------------------------------------------------
TRITONSERVER_Error*
HostBuffer::Allocate(const AclRuntime* rt, size_t size, bool pinned, HostBuffer* out)
{
  out->Reset();
  const size_t bytes = size == 0 ? 1 : size;
  void* ptr = nullptr;
  if (pinned) {
    NPU_GE_RETURN_IF_ACL_ERROR(*rt, aclrtMallocHost(&ptr, bytes));
    std::memset(ptr, 0, bytes);
    out->rt_ = rt;
  } else {
    ptr = std::calloc(bytes, 1);
    if (ptr == nullptr) {
      return NPU_GE_ERROR(INTERNAL, "out of host memory for " << bytes << " bytes");
    }
  }
  out->ptr_ = static_cast<uint8_t*>(ptr);
  out->size_ = size;
  return nullptr;
}

HostBuffer&
HostBuffer::operator=(HostBuffer&& o) noexcept
{
  if (this != &o) {
    Reset();
    std::swap(rt_, o.rt_);
    std::swap(ptr_, o.ptr_);
    std::swap(size_, o.size_);
  }
  return *this;
}

void
HostBuffer::Reset()
{
  if (ptr_ != nullptr && rt_ != nullptr) {
    LogAclReleaseError(*rt_, "aclrtFreeHost", rt_->aclrtFreeHost(ptr_));
  } else if (ptr_ != nullptr) {
    std::free(ptr_);
  }
  rt_ = nullptr;
  ptr_ = nullptr;
  size_ = 0;
}

// ---- LoadedModel --------------------------------------------------------------
TRITONSERVER_Error*
LoadedModel::Load(const AclRuntime* rt, const std::string& path, LoadedModel* out)
{
  out->Reset();
  uint32_t id = 0;
  NPU_GE_RETURN_IF_ACL_ERROR(*rt, aclmdlLoadFromFile(path.c_str(), &id));
  out->rt_ = rt;
  out->id_ = id;
  out->loaded_ = true;
  return nullptr;
}

LoadedModel&
LoadedModel::operator=(LoadedModel&& o) noexcept
{
  if (this != &o) {
    Reset();
    std::swap(rt_, o.rt_);
    std::swap(id_, o.id_);
    std::swap(loaded_, o.loaded_);
  }
  return *this;
}

void
LoadedModel::Reset()
{
  if (loaded_) {
    LogAclReleaseError(*rt_, "aclmdlUnload", rt_->aclmdlUnload(id_));
  }
  rt_ = nullptr;
  id_ = 0;
  loaded_ = false;
}

// ---- ModelDesc ----------------------------------------------------------------
TRITONSERVER_Error*
ModelDesc::FromModel(const AclRuntime* rt, const LoadedModel& model, ModelDesc* out)
{
  out->Reset();
  aclmdlDesc* desc = rt->aclmdlCreateDesc();
  if (desc == nullptr) {
    return AclError(*rt, "aclmdlCreateDesc", ACL_ERROR_BAD_ALLOC);
  }
  out->rt_ = rt;
  out->desc_ = desc;
  NPU_GE_RETURN_IF_ACL_ERROR(*rt, aclmdlGetDesc(desc, model.id()));
  return nullptr;
}

ModelDesc&
ModelDesc::operator=(ModelDesc&& o) noexcept
{
  if (this != &o) {
    Reset();
    std::swap(rt_, o.rt_);
    std::swap(desc_, o.desc_);
  }
  return *this;
}

void
ModelDesc::Reset()
{
  if (desc_ != nullptr) {
    LogAclReleaseError(*rt_, "aclmdlDestroyDesc", rt_->aclmdlDestroyDesc(desc_));
  }
  rt_ = nullptr;
  desc_ = nullptr;
}

// ---- Dataset ------------------------------------------------------------------
TRITONSERVER_Error*
Dataset::Create(const AclRuntime* rt, Dataset* out)
{
  out->Reset();
  aclmdlDataset* ds = rt->aclmdlCreateDataset();
  if (ds == nullptr) {
    return AclError(*rt, "aclmdlCreateDataset", ACL_ERROR_BAD_ALLOC);
  }
  out->rt_ = rt;
  out->dataset_ = ds;
  return nullptr;
}

TRITONSERVER_Error*
Dataset::AddBuffer(void* device_ptr, size_t size)
{
  aclDataBuffer* buf = rt_->aclCreateDataBuffer(device_ptr, size);
  if (buf == nullptr) {
    return AclError(*rt_, "aclCreateDataBuffer", ACL_ERROR_BAD_ALLOC);
  }
  buffers_.push_back(buf);
  NPU_GE_RETURN_IF_ACL_ERROR(*rt_, aclmdlAddDatasetBuffer(dataset_, buf));
  return nullptr;
}

Dataset&
Dataset::operator=(Dataset&& o) noexcept
{
  if (this != &o) {
    Reset();
    std::swap(rt_, o.rt_);
    std::swap(dataset_, o.dataset_);
    std::swap(buffers_, o.buffers_);
  }
  return *this;
}

void
Dataset::Reset()
{
  if (dataset_ != nullptr) {
    LogAclReleaseError(*rt_, "aclmdlDestroyDataset", rt_->aclmdlDestroyDataset(dataset_));
  }
  for (aclDataBuffer* buf : buffers_) {
    LogAclReleaseError(*rt_, "aclDestroyDataBuffer", rt_->aclDestroyDataBuffer(buf));
  }
  buffers_.clear();
  rt_ = nullptr;
  dataset_ = nullptr;
}

}  // namespace npu_ge
