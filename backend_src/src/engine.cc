#include "engine.h"

#include <chrono>

namespace npu_ge {

uint64_t
NowNs()
{
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace npu_ge
