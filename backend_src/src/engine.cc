#include "engine.h"

#include <chrono>

#include "triton_utils.h"

namespace npu_ge {

TRITONSERVER_Error*
EngineInstance::Launch(size_t, size_t, uint64_t*)
{
  return NPU_GE_ERROR(UNSUPPORTED, "this engine runs one buffer set only (no Launch)");
}

TRITONSERVER_Error*
EngineInstance::Wait(size_t, uint64_t*)
{
  return NPU_GE_ERROR(UNSUPPORTED, "this engine runs one buffer set only (no Wait)");
}

uint64_t
NowNs()
{
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace npu_ge
