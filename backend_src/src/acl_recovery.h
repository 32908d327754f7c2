// Recovery of an ACL model instance whose wait failed (a timeout, an error of
// queued work, a lost device). What CANN documents, and so what this relies on:
//  - aclrtDestroyStream waits for the stream's unfinished tasks (CANN 8.0
//    reference): never called on a stream whose work may not end;
//  - aclrtStreamAbort stops the running task and discards the queued ones
//    (CANN 8.0 / 8.5 / 9.0 references), but CANN's product tables (8.3.RC1,
//    8.5.0, 9.0.0, 9.1.0) mark it unsupported on Atlas inference (310P), Atlas
//    training and Atlas 200I/500 A2 products: there the symbol exists and the
//    call fails;
//  - aclrtDestroyStreamForce destroys the stream without waiting (CANN 7.0 /
//    8.0 / 9.0 references) and promises nothing more: the running task may go
//    on writing into its buffers after the call;
//  - aclrtSynchronizeDeviceWithTimeout waits, bounded, for all work of the
//    current context's device (CANN 8.0 / 8.5 / 9.0 references; every product
//    in the 8.5.0 and 9.0.0 tables).
// So after a failed wait the instance stops the stream with aclrtStreamAbort
// (then it frees and rebuilds at once); where that fails it destroys the
// stream by force and PARKS everything the abandoned work may touch (the
// buffer sets with their pinned host staging, the model and its description,
// the context, the device reference) and rebuilds with fresh ones. Parked
// resources are freed only when the instance is finalized (model unload),
// after aclrtSynchronizeDeviceWithTimeout returned ACL_SUCCESS; otherwise they
// are leaked on purpose, logged and counted (npu_ge_parked_leaked_total).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "acl_runtime.h"
#include "acl_utils.h"
#include "device_errors.h"  // IsDeviceLostCode: the device-lost codes

namespace npu_ge {

// One set of buffers for one execution: device inputs/outputs, their
// datasets, and the host staging the instance gathers into / scatters from.
struct BufferSet {
  std::vector<DeviceBuffer> in_dev;   // model input order
  std::vector<DeviceBuffer> out_dev;  // model output order
  Dataset in_ds;
  Dataset out_ds;
  std::vector<HostBuffer> in_host;   // config input order
  std::vector<HostBuffer> out_host;  // config output order
};

// Everything an execution that may still run can touch. Released in the
// order below (buffers, description, model, stream, context, device) by
// ReleaseParked, with the context current.
struct ParkedExecution {
  std::vector<BufferSet> sets;
  ModelDesc desc;
  LoadedModel model;
  StreamOwner
      stream;  // empty after aclrtDestroyStreamForce; live when nothing stopped it
  ContextOwner ctx;
  DeviceRef device;
};

// The most executions one instance parks; one more puts it out of service
// (each holds a copy of the model and its buffers: a model that fails every
// request must not fill the device).
constexpr size_t kMaxParkedExecutions = 4;

// How a stream a failed wait left work on was stopped.
enum class StreamStop {
  kIdle,     // nothing left on it (aclrtStreamAbort, or it ended): free at once
  kForced,   // destroyed by aclrtDestroyStreamForce: its work may go on (park)
  kRunning,  // nothing could stop it; the stream is left alive (park, out of service)
};

// Stops `stream` without waiting for ever: aclrtStreamAbort, else
// aclrtDestroyStreamForce (then `stream` no longer owns the handle), else one
// more wait bounded by `last_wait_ms`. Logged with `who`.
StreamStop StopFailedStream(
    const AclRuntime& rt, StreamOwner* stream, int32_t last_wait_ms,
    const std::string& who);

// Frees `parked` once aclrtSynchronizeDeviceWithTimeout(bound_ms) returned
// ACL_SUCCESS on its device; otherwise keeps it allocated for the rest of the
// process (logged with `who`). Returns the number of executions leaked.
size_t ReleaseParked(
    const AclRuntime& rt, std::vector<std::unique_ptr<ParkedExecution>>* parked,
    int32_t bound_ms, const std::string& who);

}  // namespace npu_ge
