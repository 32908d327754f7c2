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
int g_lsan_leaks = -1;  // -1: no leak check ran

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
  const char* path = std::getenv("NPU_GE_DOUBLE_STATE_FILE");
  if (path == nullptr) return;
  size_t bytes = 0;
  for (const auto& kv : g_allocations) bytes += kv.second.size;
  int refs = 0;
  for (const auto& kv : g_device_refs) refs += kv.second;
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
      "\"host_allocations\": %zu, \"executions\": %llu, \"lsan_leaks\": %d}\n",
      static_cast<int>(getpid()), g_initialized ? "true" : "false", g_init_calls,
      g_finalize_calls, g_finalize_without_init, g_allocations.size(), bytes,
      g_contexts.size(), g_streams.size(), g_models.size(), g_descs.size(),
      g_datasets.size(), g_data_buffers.size(), refs, g_host_blocks.size(),
      static_cast<unsigned long long>(g_executions), g_lsan_leaks);
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

// ---- offline models --------------------------------------------------------
namespace {

aclError
FillDims(const acl_double::TensorSpec& t, aclmdlIODims* dims)
{
  std::memset(dims, 0, sizeof(*dims));
  std::snprintf(dims->name, sizeof(dims->name), "%s", t.name.c_str());
  dims->dimCount = t.dims.size();
  for (size_t d = 0; d < t.dims.size(); ++d) dims->dims[d] = t.dims[d];
  return ACL_SUCCESS;
}

// Bytes of tensor `t` at the model's largest gear. With dims or image size
// gears its shape is that of input `input` in the last gear (outputs have
// their first input's elements per row).
size_t
LargestGearBytes(const ModelSpec& s, const acl_double::TensorSpec& t, size_t input)
{
  const size_t gears = s.dims_gears.size() + s.hw_gears.size();
  if (gears == 0) return s.TensorBytes(t, s.MaxRows());
  size_t n = 1;
  for (int64_t d : s.DimsInGear(input, gears - 1)) n *= static_cast<size_t>(d);
  return n * acl_double::DtypeSize(t.dtype);
}

}  // namespace

extern "C" {

aclmdlDesc*
aclmdlCreateDesc()
{
  std::lock_guard<std::mutex> lock(g_mu);
  if (ShouldFail("aclmdlCreateDesc")) return nullptr;
  aclmdlDesc* d = new aclmdlDesc();
  g_descs.insert(d);
  WriteStateLocked();
  return d;
}

aclError
aclmdlDestroyDesc(aclmdlDesc* desc)
{
  DOUBLE_ENTER("aclmdlDestroyDesc");
  if (g_descs.erase(desc) == 0)
    return Fail(ACL_ERROR_INVALID_PARAM, "unknown model desc");
  delete desc;
  WriteStateLocked();
  return ACL_SUCCESS;
}

// CANN 8.0's API reference lists aclmdlGetDescFromFile as not supported on
// any Atlas product family: the double behaves like that product (exported,
// always failing), so a backend relying on it fails every load here too.
aclError
aclmdlGetDescFromFile(aclmdlDesc* desc, const char* path)
{
  DOUBLE_ENTER("aclmdlGetDescFromFile");
  (void)desc;
  return Fail(
      ACL_ERROR_API_NOT_SUPPORT,
      std::string(
          "aclmdlGetDescFromFile is not supported on this product (as on "
          "Atlas products with CANN 8.0); load the model and use "
          "aclmdlGetDesc: ") +
          path);
}

aclError
aclmdlGetDesc(aclmdlDesc* desc, uint32_t model_id)
{
  DOUBLE_ENTER("aclmdlGetDesc");
  if (g_descs.count(desc) == 0)
    return Fail(ACL_ERROR_INVALID_PARAM, "unknown model desc");
  auto it = g_models.find(model_id);
  if (it == g_models.end()) return Fail(ACL_ERROR_INVALID_MODEL_ID, "unknown model id");
  desc->spec = *it->second.spec;
  desc->of_model = true;
  desc->model_id = model_id;
  return ACL_SUCCESS;
}

aclError
aclmdlQuerySize(const char* path, size_t* work, size_t* weight)
{
  DOUBLE_ENTER("aclmdlQuerySize");
  ModelSpec spec;
  std::string error;
  if (!acl_double::LoadModelSpec(path, &spec, &error)) {
    return Fail(ACL_ERROR_READ_MODEL_FAILURE, error);
  }
  *work = 0;
  *weight = spec.weight_bytes;
  return ACL_SUCCESS;
}

aclError
aclmdlLoadFromFile(const char* path, uint32_t* model_id)
{
  DOUBLE_ENTER("aclmdlLoadFromFile");
  DOUBLE_NEED_DEVICE("aclmdlLoadFromFile");
  ModelSpec spec;
  std::string error;
  if (!acl_double::LoadModelSpec(path, &spec, &error)) {
    return Fail(ACL_ERROR_READ_MODEL_FAILURE, error);
  }
  if (spec.fail_load) {
    return Fail(ACL_ERROR_RT_PARAM_INVALID, std::string("fail_load set in ") + path);
  }
  *model_id = g_next_model_id++;
  g_models[*model_id] =
      LoadedModel{std::make_shared<const ModelSpec>(std::move(spec)), device, -1};
  WriteStateLocked();
  return ACL_SUCCESS;
}

aclError
aclmdlUnload(uint32_t model_id)
{
  DOUBLE_ENTER("aclmdlUnload");
  if (g_models.erase(model_id) == 0)
    return Fail(ACL_ERROR_INVALID_MODEL_ID, "unknown model id");
  WriteStateLocked();
  return ACL_SUCCESS;
}

size_t
aclmdlGetNumInputs(aclmdlDesc* desc)
{
  return IoView{desc->spec}.NumInputs();
}

size_t
aclmdlGetNumOutputs(aclmdlDesc* desc)
{
  return desc->spec.outputs.size();
}

const char*
aclmdlGetInputNameByIndex(const aclmdlDesc* desc, size_t i)
{
  IoView io{desc->spec};
  if (io.IsDynamicInput(i)) return ACL_DYNAMIC_TENSOR_NAME;
  return i < desc->spec.inputs.size() ? desc->spec.inputs[i].name.c_str() : "";
}

const char*
aclmdlGetOutputNameByIndex(const aclmdlDesc* desc, size_t i)
{
  return i < desc->spec.outputs.size() ? desc->spec.outputs[i].name.c_str() : "";
}

aclError
aclmdlGetInputDims(const aclmdlDesc* desc, size_t i, aclmdlIODims* dims)
{
  if (i >= desc->spec.inputs.size()) {
    if (IoView{desc->spec}.IsDynamicInput(i)) {
      return FillDims(
          acl_double::TensorSpec{ACL_DYNAMIC_TENSOR_NAME, ACL_INT64, {1}, {}}, dims);
    }
    return Fail(ACL_ERROR_INVALID_PARAM, "input index out of range");
  }
  const acl_double::TensorSpec& t = desc->spec.inputs[i];
  if (t.image_dims.empty()) return FillDims(t, dims);
  // CANN: for a static-AIPP input, the dims of the input image (for YUV420SP
  // n,h,w,c), which need not multiply out to aclmdlGetInputSizeByIndex.
  return FillDims(acl_double::TensorSpec{t.name, t.dtype, t.image_dims, {}}, dims);
}

// CANN: dims whose product is aclmdlGetInputSizeByIndex's (for YUV420SP
// n,h*1.5,w,1): here the input's declared (real) layout.
aclError
aclmdlGetInputDimsV2(const aclmdlDesc* desc, size_t i, aclmdlIODims* dims)
{
  if (i >= desc->spec.inputs.size()) return aclmdlGetInputDims(desc, i, dims);
  return FillDims(desc->spec.inputs[i], dims);
}

aclError
aclmdlGetOutputDims(const aclmdlDesc* desc, size_t i, aclmdlIODims* dims)
{
  const ModelSpec& s = desc->spec;
  if (i >= s.outputs.size())
    return Fail(ACL_ERROR_INVALID_PARAM, "output index out of range");
  aclError rc = FillDims(s.outputs[i], dims);
  if (s.outputs_at_largest_gear && dims->dimCount > 0 && dims->dims[0] < 0) {
    dims->dims[0] = static_cast<int64_t>(s.MaxRows());
  }
  return rc;
}

aclDataType
aclmdlGetInputDataType(const aclmdlDesc* desc, size_t i)
{
  if (IoView{desc->spec}.IsDynamicInput(i)) return ACL_INT64;
  return i < desc->spec.inputs.size() ? desc->spec.inputs[i].dtype : ACL_DT_UNDEFINED;
}

aclDataType
aclmdlGetOutputDataType(const aclmdlDesc* desc, size_t i)
{
  return i < desc->spec.outputs.size() ? desc->spec.outputs[i].dtype : ACL_DT_UNDEFINED;
}

size_t
aclmdlGetInputSizeByIndex(aclmdlDesc* desc, size_t i)
{
  const ModelSpec& s = desc->spec;
  if (IoView{s}.IsDynamicInput(i)) return sizeof(uint64_t);
  if (i >= s.inputs.size()) return 0;
  return LargestGearBytes(s, s.inputs[i], i);
}

size_t
aclmdlGetOutputSizeByIndex(aclmdlDesc* desc, size_t i)
{
  const ModelSpec& s = desc->spec;
  if (i >= s.outputs.size()) return 0;
  return LargestGearBytes(s, s.outputs[i], s.outputs[i].from[0]);
}

aclError
aclmdlGetDynamicBatch(const aclmdlDesc* desc, aclmdlBatch* batch)
{
  std::memset(batch, 0, sizeof(*batch));
  batch->batchCount = desc->spec.gears.size();
  for (size_t g = 0; g < desc->spec.gears.size() && g < ACL_MAX_BATCH_NUM; ++g) {
    batch->batch[g] = desc->spec.gears[g];
  }
  return ACL_SUCCESS;
}

// Dims gears: every gear is the dims of the inputs named in atc --input_shape
// (dynamic_dims_order), concatenated in that order; aclmdlIODims.name is
// reserved (CANN 6.0.1 / 8.0.0 references) and left empty.
aclError
aclmdlGetInputDynamicGearCount(const aclmdlDesc* desc, size_t index, size_t* count)
{
  if (index != static_cast<size_t>(-1)) {
    return Fail(ACL_ERROR_INVALID_PARAM, "index is reserved: pass -1");
  }
  *count = desc->spec.dims_gears.size();
  return ACL_SUCCESS;
}

aclError
aclmdlGetInputDynamicDims(
    const aclmdlDesc* desc, size_t index, aclmdlIODims* dims, size_t count)
{
  const ModelSpec& s = desc->spec;
  if (index != static_cast<size_t>(-1) || count != s.dims_gears.size()) {
    return Fail(ACL_ERROR_INVALID_PARAM, "index must be -1 and count the gear count");
  }
  for (size_t g = 0; g < count; ++g) {
    std::memset(&dims[g], 0, sizeof(dims[g]));
    for (int64_t d : s.DimsGearList(g)) dims[g].dims[dims[g].dimCount++] = d;
  }
  return ACL_SUCCESS;
}

aclError
aclmdlGetDynamicHW(const aclmdlDesc* desc, size_t index, aclmdlHW* hw)
{
  (void)index;  // -1: the model's image size gears
  std::memset(hw, 0, sizeof(*hw));
  hw->hwCount = desc->spec.hw_gears.size();
  for (size_t g = 0; g < hw->hwCount && g < ACL_MAX_HW_NUM; ++g) {
    hw->hw[g][0] = desc->spec.hw_gears[g].first;
    hw->hw[g][1] = desc->spec.hw_gears[g].second;
  }
  return ACL_SUCCESS;
}

aclmdlDataset*
aclmdlCreateDataset()
{
  std::lock_guard<std::mutex> lock(g_mu);
  aclmdlDataset* ds = new aclmdlDataset();
  g_datasets.insert(ds);
  WriteStateLocked();
  return ds;
}

aclError
aclmdlDestroyDataset(const aclmdlDataset* dataset)
{
  DOUBLE_ENTER("aclmdlDestroyDataset");
  aclmdlDataset* ds = const_cast<aclmdlDataset*>(dataset);
  if (g_datasets.erase(ds) == 0) return Fail(ACL_ERROR_INVALID_PARAM, "unknown dataset");
  delete ds;  // like ACL: the data buffers are not freed
  WriteStateLocked();
  return ACL_SUCCESS;
}

aclError
aclmdlAddDatasetBuffer(aclmdlDataset* dataset, aclDataBuffer* buffer)
{
  DOUBLE_ENTER("aclmdlAddDatasetBuffer");
  if (g_datasets.count(dataset) == 0 || g_data_buffers.count(buffer) == 0) {
    return Fail(ACL_ERROR_INVALID_PARAM, "unknown dataset or data buffer");
  }
  dataset->buffers.push_back(buffer);
  return ACL_SUCCESS;
}

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

aclError
aclmdlSetDynamicBatchSize(
    uint32_t model_id, aclmdlDataset* dataset, size_t index, uint64_t batch)
{
  DOUBLE_ENTER("aclmdlSetDynamicBatchSize");
  auto it = g_models.find(model_id);
  if (it == g_models.end()) return Fail(ACL_ERROR_INVALID_MODEL_ID, "unknown model id");
  const ModelSpec& s = *it->second.spec;
  if (!IoView{s}.IsDynamicInput(index)) {
    return Fail(ACL_ERROR_INVALID_PARAM, "index is not the dynamic batch input");
  }
  bool is_gear = false;
  for (uint64_t g : s.gears) is_gear = is_gear || g == batch;
  if (!is_gear) {
    return Fail(
        ACL_ERROR_INVALID_PARAM, "batch " + std::to_string(batch) + " is not a gear");
  }
  if (g_datasets.count(dataset) == 0)
    return Fail(ACL_ERROR_INVALID_PARAM, "unknown dataset");
  dataset->dynamic_batch = batch;
  return ACL_SUCCESS;
}

aclError
aclmdlGetInputIndexByName(const aclmdlDesc* desc, const char* name, size_t* index)
{
  DOUBLE_ENTER("aclmdlGetInputIndexByName");
  IoView io{desc->spec};
  for (size_t i = 0; i < io.NumInputs(); ++i) {
    if (std::strcmp(aclmdlGetInputNameByIndex(desc, i), name) == 0) {
      *index = i;
      return ACL_SUCCESS;
    }
  }
  return Fail(ACL_ERROR_INVALID_PARAM, std::string("no input named ") + name);
}

}  // extern "C"

namespace {

// Checks what CANN checks before a shape gear is set on `dataset`: the model,
// that `index` is its dynamic-shape input, the dataset. Returns the model.
aclError
ShapeGearTarget(
    uint32_t model_id, const aclmdlDataset* dataset, size_t index, LoadedModel** model)
{
  auto it = g_models.find(model_id);
  if (it == g_models.end()) return Fail(ACL_ERROR_INVALID_MODEL_ID, "unknown model id");
  if (!IoView{*it->second.spec}.IsDynamicInput(index)) {
    return Fail(ACL_ERROR_INVALID_PARAM, "index is not the dynamic-shape input");
  }
  if (g_datasets.count(const_cast<aclmdlDataset*>(dataset)) == 0) {
    return Fail(ACL_ERROR_INVALID_PARAM, "unknown dataset");
  }
  *model = &it->second;
  return ACL_SUCCESS;
}

// Records gear `g` (or fails when the value matches no gear, g < 0).
aclError
RecordShapeGear(
    LoadedModel* model, aclmdlDataset* dataset, int64_t g, const std::string& what)
{
  if (g < 0) return Fail(ACL_ERROR_INVALID_PARAM, what + " is not a gear of the model");
  dataset->shape_gear = g;
  model->last_shape_gear = g;
  return ACL_SUCCESS;
}

}  // namespace

extern "C" {

aclError
aclmdlSetInputDynamicDims(
    uint32_t model_id, aclmdlDataset* dataset, size_t index, const aclmdlIODims* dims)
{
  DOUBLE_ENTER("aclmdlSetInputDynamicDims");
  LoadedModel* m = nullptr;
  aclError rc = ShapeGearTarget(model_id, dataset, index, &m);
  if (rc != ACL_SUCCESS) return rc;
  const ModelSpec& s = *m->spec;
  std::vector<int64_t> given(dims->dims, dims->dims + dims->dimCount);
  int64_t found = -1;
  for (size_t g = 0; g < s.dims_gears.size() && found < 0; ++g) {
    if (s.DimsGearList(g) == given) found = static_cast<int64_t>(g);  // CANN's order
  }
  std::string text;
  for (int64_t d : given) text += (text.empty() ? "" : ",") + std::to_string(d);
  return RecordShapeGear(m, dataset, found, "dims [" + text + "]");
}

aclError
aclmdlSetDynamicHWSize(
    uint32_t model_id, aclmdlDataset* dataset, size_t index, uint64_t height,
    uint64_t width)
{
  DOUBLE_ENTER("aclmdlSetDynamicHWSize");
  LoadedModel* m = nullptr;
  aclError rc = ShapeGearTarget(model_id, dataset, index, &m);
  if (rc != ACL_SUCCESS) return rc;
  int64_t found = -1;
  for (size_t g = 0; g < m->spec->hw_gears.size() && found < 0; ++g) {
    if (m->spec->hw_gears[g] == std::make_pair(height, width))
      found = static_cast<int64_t>(g);
  }
  return RecordShapeGear(
      m, dataset, found,
      "image size " + std::to_string(height) + "x" + std::to_string(width));
}

// Output dims follow their first input's gear dims; before any gear is set,
// the largest gear (what CANN reports while no dynamic info is set).
aclError
aclmdlGetCurOutputDims(const aclmdlDesc* desc, size_t index, aclmdlIODims* dims)
{
  DOUBLE_ENTER("aclmdlGetCurOutputDims");
  if (g_descs.count(const_cast<aclmdlDesc*>(desc)) == 0 || !desc->of_model) {
    return Fail(ACL_ERROR_INVALID_PARAM, "desc not filled by aclmdlGetDesc");
  }
  auto it = g_models.find(desc->model_id);
  if (it == g_models.end()) return Fail(ACL_ERROR_INVALID_MODEL_ID, "model unloaded");
  const ModelSpec& s = *it->second.spec;
  if (index >= s.outputs.size()) {
    return Fail(ACL_ERROR_INVALID_PARAM, "output index out of range");
  }
  const acl_double::OutputSpec& out = s.outputs[index];
  FillDims(out, dims);
  if (s.ShapeGearCount() == 0) return ACL_SUCCESS;
  const int64_t g = it->second.last_shape_gear;
  const size_t gear = g < 0 ? s.ShapeGearCount() - 1 : static_cast<size_t>(g);
  const std::vector<int64_t> shaped = s.DimsInGear(out.from[0], gear);
  dims->dimCount = shaped.size();
  for (size_t d = 0; d < shaped.size(); ++d) dims->dims[d] = shaped[d];
  return ACL_SUCCESS;
}

}  // extern "C"
