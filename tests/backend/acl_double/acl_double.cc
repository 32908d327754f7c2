// TEST DOUBLE of the ACL runtime (libascendcl.so) for npu_ge's tests. It is
// not CANN: it exports the ACL functions the backend calls, with the exact
// signatures of the CANN headers, and emulates them on the host:
//  - "device" memory is host memory; every live allocation, context, stream,
//    loaded model, model description, dataset, data buffer and device
//    reference is counted, and the counts are written as JSON to
//    $NPU_GE_DOUBLE_STATE_FILE after every change;
//  - models are text descriptions (model_file.h) executed by a checkable
//    formula y = scale * (sum of inputs) + offset per element;
//  - $NPU_GE_DOUBLE_FAIL_CALLS=aclrtCreateStream,... makes those calls fail;
//  - $NPU_GE_DOUBLE_DEVICE_ERROR=<device>:<aclError>[:<after_n_executions>]
//    puts one device in error with that code (execution.cc); executions run
//    per device are counted ("executions_by_device" in the state file);
//  - variants without some symbols (older CANN): acl_double_variants.h;
//  - aclmdlGetDescFromFile fails as CANN 8.0 documents for Atlas products;
//  - $NPU_GE_DOUBLE_LEAK_CHECK_AT_FINALIZE=1: when built with AddressSanitizer,
//    aclFinalize (the backend's last ACL call) runs LeakSanitizer's check and
//    records the result as "lsan_leaks" in the state file; with
//    $NPU_GE_DOUBLE_LEAK_ON_PURPOSE=1 aclInit leaks 4242 bytes (to prove the
//    check sees leaks);
//  - streams are asynchronous (streams.h): aclrtMemcpyAsync and
//    aclmdlExecuteAsync queue work that runs in order on the stream's own
//    thread; results exist only after aclrtSynchronizeStream[WithTimeout];
//    an execution takes delay_us + delay_per_row_us x rows (model_file.h,
//    execution.cc);
//  - $NPU_GE_DOUBLE_DEVICE_COUNT (default 8) devices; utilization of device d
//    is the load of other processes, $NPU_GE_DOUBLE_OTHER_LOAD percent
//    (default 40 + d, so devices can be told apart), plus the share of the
//    last second its executions kept it busy (capped at 100); HBM total
//    32 GiB, used = 2 GiB + allocations + weights.
// Calls that need a device check the calling thread's current context, as
// the real runtime does.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "acl/acl.h"
#include "model_file.h"
#include "models.h"
#include "runtime_state.h"
#include "streams.h"

using acl_double::ModelSpec;

namespace acl_double {

struct Context {
  int32_t device;
};

constexpr uint64_t kHbmTotal = 32ull << 30;
constexpr uint64_t kHbmReserved = 2ull << 30;

std::mutex g_mu;
bool g_initialized = false;
int g_init_calls = 0;
int g_finalize_calls = 0;
int g_finalize_without_init = 0;  // aclFinalize calls before a successful aclInit
std::map<int32_t, int> g_device_refs;
std::set<Context*> g_contexts;
std::set<Stream*> g_streams;
std::set<void*> g_host_blocks;
std::map<uintptr_t, Allocation> g_allocations;
std::map<uint32_t, LoadedModel> g_models;
uint32_t g_next_model_id = 1;
std::set<aclmdlDesc*> g_descs;
std::set<aclmdlDataset*> g_datasets;
std::set<aclDataBuffer*> g_data_buffers;
uint64_t g_executions = 0;
std::map<int32_t, uint64_t> g_executions_by_device;
int g_lsan_leaks = -1;  // -1: no leak check ran
// Device memory in use (allocations + weights of loaded models, every device)
// and its highest value so far: what a load or a reload costs at its peak.
uint64_t g_device_bytes = 0;
uint64_t g_peak_device_bytes = 0;
uint64_t g_model_loads = 0;  // successful aclmdlLoadFromFile calls

namespace {
thread_local Context* t_context = nullptr;
thread_local int32_t t_device = -1;
thread_local std::string t_error;
thread_local std::string t_error_returned;
}  // namespace

int32_t
DeviceCount()
{
  const char* v = std::getenv("NPU_GE_DOUBLE_DEVICE_COUNT");
  return v == nullptr ? 8 : std::atoi(v);
}

bool
ShouldFail(const char* call)
{
  const char* v = std::getenv("NPU_GE_DOUBLE_FAIL_CALLS");
  if (v == nullptr) return false;
  std::string list = std::string(",") + v + ",";
  return list.find(std::string(",") + call + ",") != std::string::npos;
}

aclError
Fail(aclError code, const std::string& msg)
{
  t_error = "[acl double] " + msg;
  return code;
}

// Writes the resource counts; called with g_mu held.
void
WriteStateLocked()
{
  size_t bytes = 0;
  for (const auto& kv : g_allocations) bytes += kv.second.size;
  g_device_bytes = bytes;
  for (const auto& kv : g_models) g_device_bytes += kv.second.spec->weight_bytes;
  g_peak_device_bytes = std::max(g_peak_device_bytes, g_device_bytes);
  const char* path = std::getenv("NPU_GE_DOUBLE_STATE_FILE");
  if (path == nullptr) return;
  int refs = 0;
  for (const auto& kv : g_device_refs) refs += kv.second;
  std::string by_device;
  for (const auto& kv : g_executions_by_device) {
    by_device += std::string(by_device.empty() ? "" : ", ") + "\"" +
                 std::to_string(kv.first) + "\": " + std::to_string(kv.second);
  }
  std::string tmp = std::string(path) + ".tmp." + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  std::fprintf(
      f,
      "{\"pid\": %d, \"initialized\": %s, \"init_calls\": %d, "
      "\"finalize_calls\": %d, \"finalize_without_init\": %d, "
      "\"allocations\": %zu, \"allocated_bytes\": %zu, "
      "\"contexts\": %zu, \"streams\": %zu, \"models\": %zu, \"descs\": %zu, "
      "\"datasets\": %zu, \"data_buffers\": %zu, \"device_refs\": %d, "
      "\"host_allocations\": %zu, \"executions\": %llu, \"lsan_leaks\": %d, "
      "\"device_bytes\": %llu, \"peak_device_bytes\": %llu, \"model_loads\": %llu, "
      "\"executions_by_device\": {%s}}\n",
      static_cast<int>(getpid()), g_initialized ? "true" : "false", g_init_calls,
      g_finalize_calls, g_finalize_without_init, g_allocations.size(), bytes,
      g_contexts.size(), g_streams.size(), g_models.size(), g_descs.size(),
      g_datasets.size(), g_data_buffers.size(), refs, g_host_blocks.size(),
      static_cast<unsigned long long>(g_executions), g_lsan_leaks,
      static_cast<unsigned long long>(g_device_bytes),
      static_cast<unsigned long long>(g_peak_device_bytes),
      static_cast<unsigned long long>(g_model_loads), by_device.c_str());
  std::fclose(f);
  std::rename(tmp.c_str(), path);
}

// Device of the calling thread: its current context's, else aclrtSetDevice's.
int32_t
CurrentDeviceLocked()
{
  if (t_context != nullptr && g_contexts.count(t_context) > 0) return t_context->device;
  return t_device;
}

// The live allocation containing [p, p+n), or nullptr.
const Allocation*
FindAllocationLocked(const void* p, size_t n)
{
  uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  auto it = g_allocations.upper_bound(addr);
  if (it == g_allocations.begin()) return nullptr;
  --it;
  if (addr + n > it->first + it->second.size) return nullptr;
  return &it->second;
}

// The state file exists from the moment the double is loaded, so a test can
// tell "loaded but never initialized" from "never loaded". Defined after the
// globals it reads: initialized after them.
struct WriteStateAtLoad {
  WriteStateAtLoad()
  {
    std::lock_guard<std::mutex> lock(g_mu);
    WriteStateLocked();
  }
} g_write_state_at_load;

}  // namespace acl_double

using namespace acl_double;  // NOLINT: this file is the double's state

// Provided by the sanitizer runtime when it is loaded; null otherwise.
extern "C" int __lsan_do_recoverable_leak_check() __attribute__((weak));

namespace {
void* volatile g_leak_sink = nullptr;
}  // namespace

extern "C" {

aclError
aclInit(const char*)
{
  std::lock_guard<std::mutex> lock(g_mu);
  if (ShouldFail("aclInit"))
    return Fail(ACL_ERROR_RT_PARAM_INVALID, "aclInit failure injected");
  if (g_initialized) return Fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit called twice");
  g_initialized = true;
  ++g_init_calls;
  if (std::getenv("NPU_GE_DOUBLE_LEAK_ON_PURPOSE") != nullptr) {
    g_leak_sink = std::malloc(4242);
    g_leak_sink = nullptr;  // unreachable from now on: a real leak
  }
  WriteStateLocked();
  return ACL_SUCCESS;
}

aclError
aclFinalize()
{
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_initialized) {
      ++g_finalize_without_init;
      WriteStateLocked();
      return Fail(ACL_ERROR_UNINITIALIZE, "aclFinalize before aclInit");
    }
    g_initialized = false;
    ++g_finalize_calls;
    WriteStateLocked();
  }
  if (std::getenv("NPU_GE_DOUBLE_LEAK_CHECK_AT_FINALIZE") != nullptr &&
      __lsan_do_recoverable_leak_check != nullptr) {
    // The backend has released everything it owns by now; whatever is
    // unreachable is a leak. (tritonserver's own exit hangs under ASan in a
    // bundled library's destructor, so the check at exit never comes.)
    int leaks = __lsan_do_recoverable_leak_check();
    std::lock_guard<std::mutex> lock(g_mu);
    g_lsan_leaks = leaks;
    WriteStateLocked();
  }
  return ACL_SUCCESS;
}

const char*
aclGetRecentErrMsg()
{
  t_error_returned = t_error;
  t_error.clear();
  return t_error_returned.empty() ? nullptr : t_error_returned.c_str();
}

aclError
aclrtGetDeviceCount(uint32_t* count)
{
  DOUBLE_ENTER("aclrtGetDeviceCount");
  *count = static_cast<uint32_t>(DeviceCount());
  return ACL_SUCCESS;
}

aclError
aclrtSetDevice(int32_t device)
{
  DOUBLE_ENTER("aclrtSetDevice");
  if (device < 0 || device >= DeviceCount()) {
    return Fail(
        ACL_ERROR_RT_INVALID_DEVICEID, "device " + std::to_string(device) +
                                           " does not exist (" +
                                           std::to_string(DeviceCount()) + " devices)");
  }
  ++g_device_refs[device];
  t_device = device;
  t_context = nullptr;  // the device's default context becomes current
  WriteStateLocked();
  return ACL_SUCCESS;
}

aclError
aclrtResetDevice(int32_t device)
{
  DOUBLE_ENTER("aclrtResetDevice");
  auto it = g_device_refs.find(device);
  if (it == g_device_refs.end() || it->second == 0) {
    return Fail(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtResetDevice without aclrtSetDevice");
  }
  if (--it->second == 0) g_device_refs.erase(it);
  if (t_device == device) t_device = -1;
  WriteStateLocked();
  return ACL_SUCCESS;
}

aclError
aclrtCreateContext(aclrtContext* context, int32_t device)
{
  DOUBLE_ENTER("aclrtCreateContext");
  if (g_device_refs.count(device) == 0) {
    return Fail(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtCreateContext on a device not set");
  }
  Context* ctx = new Context{device};
  g_contexts.insert(ctx);
  t_context = ctx;
  *context = ctx;
  WriteStateLocked();
  return ACL_SUCCESS;
}

aclError
aclrtDestroyContext(aclrtContext context)
{
  DOUBLE_ENTER("aclrtDestroyContext");
  Context* ctx = static_cast<Context*>(context);
  if (g_contexts.erase(ctx) == 0)
    return Fail(ACL_ERROR_RT_PARAM_INVALID, "unknown context");
  if (t_context == ctx) t_context = nullptr;
  delete ctx;
  WriteStateLocked();
  return ACL_SUCCESS;
}

aclError
aclrtSetCurrentContext(aclrtContext context)
{
  DOUBLE_ENTER("aclrtSetCurrentContext");
  Context* ctx = static_cast<Context*>(context);
  if (g_contexts.count(ctx) == 0)
    return Fail(ACL_ERROR_RT_PARAM_INVALID, "unknown context");
  t_context = ctx;
  return ACL_SUCCESS;
}

aclError
aclrtMalloc(void** ptr, size_t size, aclrtMemMallocPolicy)
{
  DOUBLE_ENTER("aclrtMalloc");
  DOUBLE_NEED_DEVICE("aclrtMalloc");
  if (size == 0) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc of 0 bytes");
  void* p = std::malloc(size);
  if (p == nullptr) return Fail(ACL_ERROR_BAD_ALLOC, "out of memory");
  g_allocations[reinterpret_cast<uintptr_t>(p)] = Allocation{size, device};
  *ptr = p;
  WriteStateLocked();
  return ACL_SUCCESS;
}

aclError
aclrtFree(void* ptr)
{
  DOUBLE_ENTER("aclrtFree");
  if (g_allocations.erase(reinterpret_cast<uintptr_t>(ptr)) == 0) {
    return Fail(ACL_ERROR_INVALID_PARAM, "aclrtFree of a pointer not from aclrtMalloc");
  }
  std::free(ptr);
  WriteStateLocked();
  return ACL_SUCCESS;
}

aclError
aclrtMemcpy(
    void* dst, size_t dest_max, const void* src, size_t count, aclrtMemcpyKind kind)
{
  DOUBLE_ENTER("aclrtMemcpy");
  DOUBLE_NEED_DEVICE("aclrtMemcpy");
  if (count > dest_max)
    return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy count > destMax");
  const void* dev = kind == ACL_MEMCPY_HOST_TO_DEVICE ? dst : src;
  if (kind != ACL_MEMCPY_HOST_TO_DEVICE && kind != ACL_MEMCPY_DEVICE_TO_HOST) {
    return Fail(ACL_ERROR_INVALID_PARAM, "the double copies host<->device only");
  }
  const Allocation* a = FindAllocationLocked(dev, count);
  if (a == nullptr)
    return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy outside device memory");
  if (a->device != device)
    return Fail(ACL_ERROR_INVALID_PARAM, "memory of another device");
  std::memcpy(dst, src, count);
  return ACL_SUCCESS;
}

aclError
aclrtGetMemInfo(aclrtMemAttr, size_t* free_bytes, size_t* total_bytes)
{
  DOUBLE_ENTER("aclrtGetMemInfo");
  DOUBLE_NEED_DEVICE("aclrtGetMemInfo");
  uint64_t used = kHbmReserved;
  for (const auto& kv : g_allocations) {
    if (kv.second.device == device) used += kv.second.size;
  }
  for (const auto& kv : g_models) {
    if (kv.second.device == device) used += kv.second.spec->weight_bytes;
  }
  *total_bytes = kHbmTotal;
  *free_bytes = kHbmTotal - used;
  return ACL_SUCCESS;
}

aclError
aclrtGetDeviceUtilizationRate(int32_t device, aclrtUtilizationInfo* info)
{
  DOUBLE_ENTER("aclrtGetDeviceUtilizationRate");
  if (device < 0 || device >= DeviceCount()) {
    return Fail(ACL_ERROR_RT_INVALID_DEVICEID, "no such device");
  }
  const char* other = std::getenv("NPU_GE_DOUBLE_OTHER_LOAD");
  const double busy = BusyPercent(device, std::chrono::milliseconds(1000));
  const double load = (other == nullptr ? 40 + device : std::atof(other)) + busy;
  info->cubeUtilization = static_cast<int32_t>(std::min(100.0, load + 0.5));
  info->vectorUtilization = 20;
  info->aicpuUtilization = 1;
  info->memoryUtilization = -1;
  return ACL_SUCCESS;
}

}  // extern "C"

// ---- data buffers (acl_base.h: the runtime library's, not the model library's)
extern "C" {

aclDataBuffer*
aclCreateDataBuffer(void* data, size_t size)
{
  std::lock_guard<std::mutex> lock(g_mu);
  aclDataBuffer* b = new aclDataBuffer{data, size};
  g_data_buffers.insert(b);
  WriteStateLocked();
  return b;
}

aclError
aclDestroyDataBuffer(const aclDataBuffer* buffer)
{
  DOUBLE_ENTER("aclDestroyDataBuffer");
  aclDataBuffer* b = const_cast<aclDataBuffer*>(buffer);
  if (g_data_buffers.erase(b) == 0)
    return Fail(ACL_ERROR_INVALID_PARAM, "unknown data buffer");
  delete b;
  WriteStateLocked();
  return ACL_SUCCESS;
}

}  // extern "C"
