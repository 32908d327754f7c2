// The one table of CANN's device-class ACL error codes: the codes a failed
// execution returns when the device or its memory is bad, as named in CANN's
// acl/error_codes/rt_error_codes.h. Each is counted per device and code in
// npu_ge_device_errors_total{device,code}; the kLost ones also put the
// instance out of service for good (acl_recovery.h). Pure logic: unit-tested
// in tests/backend/unit/device_errors_test.cc.
#pragma once

#include <cstddef>
#include <cstdint>

#include "acl/acl.h"

namespace npu_ge {

enum class DeviceErrorClass {
  kNone,   // not a device error (a model, parameter or timeout failure)
  kFault,  // the device faulted; the instance rebuilds and goes on serving
  kLost,   // the device cannot be trusted again: the instance is broken for good
};

struct DeviceErrorCode {
  aclError code;
  const char* name;  // the macro's name in rt_error_codes.h
  DeviceErrorClass cls;
  const char* what;  // the header's comment, for logs
};

// Every device-class code, in code order.
const DeviceErrorCode* DeviceErrorCodes(size_t* count);

// kNone for every code not in the table.
DeviceErrorClass ClassifyDeviceError(aclError rc);

// The table's entry for `rc`, nullptr when it is not a device-class code.
const DeviceErrorCode* FindDeviceErrorCode(aclError rc);

// A wait or launch that failed with `rc` leaves a device that cannot be
// trusted to run anything again (ClassifyDeviceError(rc) == kLost).
inline bool
IsDeviceLostCode(aclError rc)
{
  return ClassifyDeviceError(rc) == DeviceErrorClass::kLost;
}

}  // namespace npu_ge
