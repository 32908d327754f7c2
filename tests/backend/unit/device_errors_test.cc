// The table of CANN's device-class ACL error codes (src/device_errors.h):
// names and values agree with the rt_error_codes.h this build compiles
// against, the classes are the ones README.md lists, and the codes left out
// on purpose stay out.
#include <set>
#include <string>

#include "device_errors.h"
#include "test_util.h"

using namespace npu_ge;

namespace {

struct Named {
  aclError code;
  const char* name;
};
#define NAMED(MACRO) \
  Named              \
  {                  \
    MACRO, #MACRO    \
  }

std::set<aclError>
CodesOfClass(DeviceErrorClass cls)
{
  size_t n = 0;
  const DeviceErrorCode* codes = DeviceErrorCodes(&n);
  std::set<aclError> out;
  for (size_t i = 0; i < n; ++i) {
    if (codes[i].cls == cls) out.insert(codes[i].code);
  }
  return out;
}

}  // namespace

TEST(DeviceErrors, EveryEntryIsNamedAsInTheHeaderWithItsValue)
{
  const Named named[] = {
      NAMED(ACL_ERROR_RT_DEVICE_TASK_ABORT),
      NAMED(ACL_ERROR_RT_LOST_HEARTBEAT),
      NAMED(ACL_ERROR_RT_AICORE_EXCEPTION),
      NAMED(ACL_ERROR_RT_VECTOR_CORE_EXCEPTION),
      NAMED(ACL_ERROR_RT_DEVICE_MEM_ERROR),
      NAMED(ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR),
      NAMED(ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR),
      NAMED(ACL_ERROR_RT_LINK_ERROR),
      NAMED(ACL_ERROR_RT_SUSPECT_REMOTE_ERROR),
      NAMED(ACL_ERROR_RT_DRV_INTERNAL_ERROR),
      NAMED(ACL_ERROR_RT_L3_PORT_ERROR),
  };
  size_t n = 0;
  const DeviceErrorCode* codes = DeviceErrorCodes(&n);
  ASSERT_EQ(n, sizeof(named) / sizeof(named[0]));
  for (const Named& want : named) {
    const DeviceErrorCode* got = FindDeviceErrorCode(want.code);
    ASSERT_NE(got, nullptr) << want.name;
    EXPECT_STREQ(got->name, want.name) << want.code;
  }
  for (size_t i = 1; i < n; ++i) {  // in code order, each once
    EXPECT_LT(codes[i - 1].code, codes[i].code) << codes[i].name;
  }
  for (size_t i = 0; i < n; ++i) {
    EXPECT_NE(codes[i].cls, DeviceErrorClass::kNone) << codes[i].name;
    EXPECT_EQ(ClassifyDeviceError(codes[i].code), codes[i].cls) << codes[i].name;
    EXPECT_NE(std::string(codes[i].what), "") << codes[i].name;
  }
}

TEST(DeviceErrors, LostDeviceMemoryAndLinkCodesBreakTheInstanceCoreExceptionsDoNot)
{
  const std::set<aclError> lost = {107022, 507010, 507053, 507054, 507055,
                                   507056, 507057, 507899, 507914};
  EXPECT_EQ(CodesOfClass(DeviceErrorClass::kLost), lost);
  const std::set<aclError> fault = {507015, 507035};
  EXPECT_EQ(CodesOfClass(DeviceErrorClass::kFault), fault);
  for (aclError rc : lost) EXPECT_TRUE(IsDeviceLostCode(rc)) << rc;
  for (aclError rc : fault) EXPECT_FALSE(IsDeviceLostCode(rc)) << rc;
}

TEST(DeviceErrors, TimeoutsTrapsOverflowsAndGenericFailuresAreNotDeviceErrors)
{
  const Named left_out[] = {
      NAMED(ACL_SUCCESS),
      NAMED(ACL_ERROR_RT_PARAM_INVALID),
      NAMED(ACL_ERROR_RT_STREAM_ABORT),  // npu_ge's own aclrtStreamAbort
      NAMED(ACL_ERROR_RT_FEATURE_NOT_SUPPORT),
      NAMED(ACL_ERROR_RT_MEMORY_ALLOCATION),  // out of memory: not a bad device
      NAMED(ACL_ERROR_RT_AICORE_OVER_FLOW),
      NAMED(ACL_ERROR_RT_AIVEC_OVER_FLOW),
      NAMED(ACL_ERROR_RT_OVER_FLOW),
      NAMED(ACL_ERROR_RT_DEVICE_OOM),
      NAMED(ACL_ERROR_RT_MODEL_EXECUTE),
      NAMED(ACL_ERROR_RT_SYS_DMA),
      NAMED(ACL_ERROR_RT_AICORE_TIMEOUT),
      NAMED(ACL_ERROR_RT_AICORE_TRAP_EXCEPTION),
      NAMED(ACL_ERROR_RT_AICPU_EXCEPTION),
      NAMED(ACL_ERROR_RT_VECTOR_CORE_TIMEOUT),
      NAMED(ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION),
      NAMED(ACL_ERROR_RT_AICORE_TRAP_READ_OVERFLOW),
      NAMED(ACL_ERROR_RT_AICORE_TRAP_WRITE_OVERFLOW),
      NAMED(ACL_ERROR_RT_VECTOR_CORE_TRAP_READ_OVERFLOW),
      NAMED(ACL_ERROR_RT_VECTOR_CORE_TRAP_WRITE_OVERFLOW),
      NAMED(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT),
      NAMED(ACL_ERROR_RT_SOCKET_CLOSE),
  };
  for (const Named& c : left_out) {
    EXPECT_EQ(ClassifyDeviceError(c.code), DeviceErrorClass::kNone) << c.name;
    EXPECT_EQ(FindDeviceErrorCode(c.code), nullptr) << c.name;
    EXPECT_FALSE(IsDeviceLostCode(c.code)) << c.name;
  }
}
