// TEST DOUBLE: the state the double's source files share (acl_double.cc holds
// it; streams.cc queues work on it). Every global is guarded by g_mu.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "acl/acl.h"

namespace acl_double {

class Stream;

struct Allocation {
  size_t size;
  int32_t device;
};

extern std::mutex g_mu;
extern bool g_initialized;
extern std::set<Stream*> g_streams;
extern uint64_t g_executions;          // model executions started
extern std::set<void*> g_host_blocks;  // live aclrtMallocHost blocks

bool ShouldFail(const char* call);  // listed in $NPU_GE_DOUBLE_FAIL_CALLS
// Sets the calling thread's aclGetRecentErrMsg() text and returns `code`.
aclError Fail(aclError code, const std::string& msg);
void WriteStateLocked();
// Device of the calling thread: its current context's, else aclrtSetDevice's.
int32_t CurrentDeviceLocked();
// The live device allocation containing [p, p+n), or nullptr.
const Allocation* FindAllocationLocked(const void* p, size_t n);

}  // namespace acl_double

#define DOUBLE_ENTER(NAME)                                     \
  std::unique_lock<std::mutex> lock(acl_double::g_mu);         \
  if (acl_double::ShouldFail(NAME))                            \
    return acl_double::Fail(                                   \
        ACL_ERROR_RT_PARAM_INVALID,                            \
        NAME " failure injected by NPU_GE_DOUBLE_FAIL_CALLS"); \
  if (!acl_double::g_initialized)                              \
  return acl_double::Fail(ACL_ERROR_UNINITIALIZE, NAME " before aclInit")

#define DOUBLE_NEED_DEVICE(NAME)                      \
  int32_t device = acl_double::CurrentDeviceLocked(); \
  if (device < 0)                                     \
  return acl_double::Fail(                            \
      ACL_ERROR_RT_CONTEXT_NULL, NAME ": no current context on this thread")
