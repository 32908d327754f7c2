#include "engine.h"

#include <chrono>

namespace npu_ge {

// Without asynchronous execution the whole run happens in Launch.
TRITONSERVER_Error*
EngineInstance::Launch(size_t, size_t exec_rows, uint64_t* compute_start_ns)
{
  return Run(exec_rows, compute_start_ns, &run_end_ns_);
}

TRITONSERVER_Error*
EngineInstance::Wait(size_t, uint64_t* compute_end_ns)
{
  *compute_end_ns = run_end_ns_;
  return nullptr;
}

uint64_t
NowNs()
{
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace npu_ge
