// TEST DOUBLE: the state the double's source files share (acl_double.cc holds
// it; streams.cc queues work on it). Every global is guarded by g_mu.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "acl/acl.h"

namespace acl_double {

class Stream;

uint64_t NextAllocationSerial();  // g_mu held

struct Allocation {
  size_t size;
  int32_t device;
  // Tells a live allocation from a later one at the same address: work queued
  // on a stream remembers the serials of its buffers, and a task that runs
  // after its buffer was freed (or freed and allocated again) is caught.
  uint64_t serial = NextAllocationSerial();
};

extern std::mutex g_mu;
extern bool g_initialized;
extern std::set<Stream*> g_streams;
extern uint64_t g_executions;               // model executions started
extern std::set<void*> g_host_blocks;       // live aclrtMallocHost blocks
extern std::set<Stream*> g_orphan_streams;  // destroyed by force, work goes on

// Late work (streams.cc): tasks of force-destroyed streams that ran after the
// call. late_writes: ones whose buffers were still allocated (parked, as the
// backend must keep them); touched_freed_memory: ones whose buffers had been
// freed or allocated again (on a device, a write into memory someone else may
// own now; the double does not write it). Written with the lost devices to
// $NPU_GE_DOUBLE_STATE_FILE.streams (JSON) whenever they change.
extern uint64_t g_late_writes;
extern uint64_t g_touched_freed_memory;
// Devices in error and the code each answers with from then on
// ($NPU_GE_DOUBLE_LOSE_DEVICE_ON_VALUE hit: 507010; $NPU_GE_DOUBLE_DEVICE_ERROR
// fired: its code); listed in $NPU_GE_DOUBLE_STATE_FILE.streams.
extern std::map<int32_t, aclError> g_lost_devices;
// The code `device` answers with since it went into error, ACL_SUCCESS when
// it did not (g_mu held).
aclError LostCodeLocked(int32_t device);
// Model executions run to their end per device ("executions_by_device" in the
// state file), to tell which device served a request.
extern std::map<int32_t, uint64_t> g_executions_by_device;
void WriteStreamStateLocked();
// Checks that [p, p+n) is still the allocation (device memory, `serial`) or
// the aclrtMallocHost block (`serial` 0) it was when the task was queued,
// counts a late write when `late`; false (counted as a write into freed
// memory) when it is not. g_mu held.
bool StillOwnedLocked(const void* p, size_t n, uint64_t serial, bool late);
// Serial of the live device allocation holding [p, p+n), 0 when none (host
// memory).
uint64_t SerialOfLocked(const void* p, size_t n);

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
