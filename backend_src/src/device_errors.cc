#include "device_errors.h"

namespace npu_ge {

namespace {

// Codes are written as numbers so the table builds against any CANN's
// headers; where the header defines the name, the value is checked below.
// Chosen from acl/error_codes/rt_error_codes.h (torch-npu 2.14.0's copy, the
// one this build compiles against; CANN 8.x / 9.x carry the same values).
// Left out on purpose (backend_src/README.md, "Device errors"): timeouts
// (507014 ACL_ERROR_RT_AICORE_TIMEOUT, 507034 ACL_ERROR_RT_VECTOR_CORE_TIMEOUT,
// 507046 ACL_ERROR_RT_STREAM_SYNC_TIMEOUT: a slow kernel, handled by
// execute_timeout_ms), traps and trap overflows (507016, 507036, 507042-507045:
// the operator's own trap or out-of-bounds access), overflow statuses
// (207003, 207016, 207017), 507011 ACL_ERROR_RT_MODEL_EXECUTE (any failure),
// 507013 ACL_ERROR_RT_SYS_DMA (CANN's troubleshooting guide names bad copy
// addresses as its cause), 507901 ACL_ERROR_RT_SOCKET_CLOSE (CANN's runtime
// logs it as a successful synchronize) and the AI CPU codes (software run on
// the device's CPU).
constexpr DeviceErrorCode kCodes[] = {
    // A device task abort and a lost heartbeat: the device is gone.
    {107022, "ACL_ERROR_RT_DEVICE_TASK_ABORT", DeviceErrorClass::kLost,
     "device task aborting"},
    {507010, "ACL_ERROR_RT_LOST_HEARTBEAT", DeviceErrorClass::kLost, "ts lost heartbeat"},
    // AI Core and vector core exceptions: counted; the instance rebuilds.
    {507015, "ACL_ERROR_RT_AICORE_EXCEPTION", DeviceErrorClass::kFault,
     "aicore exception"},
    {507035, "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION", DeviceErrorClass::kFault,
     "vector core exception"},
    // Device memory, HBM ECC and link errors. 507053 is a memory UCE, which
    // CANN repairs only through aclrtGetMemUceInfo / aclrtMemUceRepair (not
    // called by npu_ge): a rebuilt instance could land on the bad memory.
    {507053, "ACL_ERROR_RT_DEVICE_MEM_ERROR", DeviceErrorClass::kLost,
     "device MEM ERROR"},
    {507054, "ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR", DeviceErrorClass::kLost,
     "hbm Multi-bit ECC error"},
    {507055, "ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR", DeviceErrorClass::kLost,
     "suspect device MEM ERROR"},
    {507056, "ACL_ERROR_RT_LINK_ERROR", DeviceErrorClass::kLost, "link ERROR"},
    {507057, "ACL_ERROR_RT_SUSPECT_REMOTE_ERROR", DeviceErrorClass::kLost,
     "suspect remote ERROR"},
    {507899, "ACL_ERROR_RT_DRV_INTERNAL_ERROR", DeviceErrorClass::kLost,
     "drv internal error"},
    // CANN's runtime maps its "device ub mem error" to this code
    // (hicann/runtime src/runtime/core/src/common/errcode_manage.cc).
    {507914, "ACL_ERROR_RT_L3_PORT_ERROR", DeviceErrorClass::kLost, "l3 port error"},
};

#define NPU_GE_CHECK_CODE(NAME, VALUE) \
  static_assert(NAME == VALUE, #NAME " is not " #VALUE " in this rt_error_codes.h")
#ifdef ACL_ERROR_RT_DEVICE_TASK_ABORT
NPU_GE_CHECK_CODE(ACL_ERROR_RT_DEVICE_TASK_ABORT, 107022);
#endif
#ifdef ACL_ERROR_RT_LOST_HEARTBEAT
NPU_GE_CHECK_CODE(ACL_ERROR_RT_LOST_HEARTBEAT, 507010);
#endif
#ifdef ACL_ERROR_RT_AICORE_EXCEPTION
NPU_GE_CHECK_CODE(ACL_ERROR_RT_AICORE_EXCEPTION, 507015);
#endif
#ifdef ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
NPU_GE_CHECK_CODE(ACL_ERROR_RT_VECTOR_CORE_EXCEPTION, 507035);
#endif
#ifdef ACL_ERROR_RT_DEVICE_MEM_ERROR
NPU_GE_CHECK_CODE(ACL_ERROR_RT_DEVICE_MEM_ERROR, 507053);
#endif
#ifdef ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR
NPU_GE_CHECK_CODE(ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR, 507054);
#endif
#ifdef ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR
NPU_GE_CHECK_CODE(ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR, 507055);
#endif
#ifdef ACL_ERROR_RT_LINK_ERROR
NPU_GE_CHECK_CODE(ACL_ERROR_RT_LINK_ERROR, 507056);
#endif
#ifdef ACL_ERROR_RT_SUSPECT_REMOTE_ERROR
NPU_GE_CHECK_CODE(ACL_ERROR_RT_SUSPECT_REMOTE_ERROR, 507057);
#endif
#ifdef ACL_ERROR_RT_DRV_INTERNAL_ERROR
NPU_GE_CHECK_CODE(ACL_ERROR_RT_DRV_INTERNAL_ERROR, 507899);
#endif
#ifdef ACL_ERROR_RT_L3_PORT_ERROR
NPU_GE_CHECK_CODE(ACL_ERROR_RT_L3_PORT_ERROR, 507914);
#endif
#undef NPU_GE_CHECK_CODE

}  // namespace

const DeviceErrorCode*
DeviceErrorCodes(size_t* count)
{
  *count = sizeof(kCodes) / sizeof(kCodes[0]);
  return kCodes;
}

const DeviceErrorCode*
FindDeviceErrorCode(aclError rc)
{
  for (const DeviceErrorCode& c : kCodes) {
    if (c.code == rc) return &c;
  }
  return nullptr;
}

DeviceErrorClass
ClassifyDeviceError(aclError rc)
{
  const DeviceErrorCode* c = FindDeviceErrorCode(rc);
  return c == nullptr ? DeviceErrorClass::kNone : c->cls;
}

}  // namespace npu_ge
