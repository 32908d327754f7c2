#include "acl_recovery.h"

#include <mutex>

namespace npu_ge {

namespace {

// Parked executions no device synchronize vouched for: never released (the
// device may still write into them), kept reachable.
std::mutex g_leaked_mu;
std::vector<std::unique_ptr<ParkedExecution>>* g_leaked =
    new std::vector<std::unique_ptr<ParkedExecution>>();

void
Leak(std::unique_ptr<ParkedExecution> p)
{
  std::lock_guard<std::mutex> lock(g_leaked_mu);
  g_leaked->push_back(std::move(p));
}

// The device of `p` finished all its work, within `bound_ms`.
bool
DeviceIdle(const AclRuntime& rt, ParkedExecution& p, int32_t bound_ms, std::string* why)
{
  if (rt.aclrtSynchronizeDeviceWithTimeout == nullptr) {
    *why =
        "this libascendcl.so has no aclrtSynchronizeDeviceWithTimeout, and the "
        "unbounded aclrtSynchronizeDevice could block the unload for ever";
    return false;
  }
  TRITONSERVER_Error* err = p.ctx.MakeCurrent();
  if (err == nullptr) {
    err = AclCall(
        rt, "aclrtSynchronizeDeviceWithTimeout",
        rt.aclrtSynchronizeDeviceWithTimeout(bound_ms));
  }
  if (err == nullptr) return true;
  *why = TRITONSERVER_ErrorMessage(err);
  TRITONSERVER_ErrorDelete(err);
  return false;
}

}  // namespace

StreamStop
StopFailedStream(
    const AclRuntime& rt, StreamOwner* stream, int32_t last_wait_ms,
    const std::string& who)
{
  if (rt.aclrtStreamAbort != nullptr) {
    const aclError rc = rt.aclrtStreamAbort(stream->get());
    if (rc == ACL_SUCCESS) {
      NPU_GE_LOG(WARN, who << ": stopped the failed execution with aclrtStreamAbort");
      return StreamStop::kIdle;
    }
    // ACL_ERROR_RT_FEATURE_NOT_SUPPORT on Atlas inference (310P), Atlas
    // training and Atlas 200I/500 A2 products, as CANN's tables say.
    LogAclReleaseError(rt, "aclrtStreamAbort", rc);
  }
  if (rt.aclrtDestroyStreamForce != nullptr) {
    const aclError rc = rt.aclrtDestroyStreamForce(stream->get());
    if (rc == ACL_SUCCESS) {
      NPU_GE_LOG(
          WARN, who << ": destroyed the stream of the failed execution with "
                       "aclrtDestroyStreamForce; its task may still run");
      stream->Release();
      return StreamStop::kForced;
    }
    LogAclReleaseError(rt, "aclrtDestroyStreamForce", rc);
  }
  if (rt.aclrtSynchronizeStreamWithTimeout == nullptr) {
    return StreamStop::kIdle;  // only an unbounded wait can have failed: it returned
  }
  // After a timeout, one more bounded wait; after any other failure it returns.
  if (rt.aclrtSynchronizeStreamWithTimeout(stream->get(), last_wait_ms) !=
      ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) {
    rt.RecentErrorMessage();  // the failure was reported already
    return StreamStop::kIdle;
  }
  return StreamStop::kRunning;
}

size_t
ReleaseParked(
    const AclRuntime& rt, std::vector<std::unique_ptr<ParkedExecution>>* parked,
    int32_t bound_ms, const std::string& who)
{
  size_t leaked = 0;
  for (std::unique_ptr<ParkedExecution>& p : *parked) {
    std::string why;
    if (!DeviceIdle(rt, *p, bound_ms, &why)) {
      NPU_GE_LOG(
          ERROR, who << ": leaving an abandoned execution's buffers, staging, model and "
                        "context allocated for the rest of the process (counted in "
                        "npu_ge_parked_leaked_total): the device did not confirm it "
                        "finished within "
                     << bound_ms << " ms (" << why
                     << "); restart the server to get the memory back");
      Leak(std::move(p));
      ++leaked;
      continue;
    }
    p->sets.clear();
    p->desc.Reset();
    p->model.Reset();
    p->stream.Reset();  // the device is idle: aclrtDestroyStream returns
    p->ctx.Reset();
    p->device.Reset();
  }
  parked->clear();
  return leaked;
}

}  // namespace npu_ge
