#include "batching.h"

#include <algorithm>

namespace npu_ge {

bool
SelectGear(const std::vector<int64_t>& gears, size_t rows, size_t* gear)
{
  bool found = false;
  size_t best = 0;
  for (int64_t g : gears) {
    if (g <= 0) continue;
    size_t candidate = static_cast<size_t>(g);
    if (candidate >= rows && (!found || candidate < best)) {
      best = candidate;
      found = true;
    }
  }
  if (found) *gear = best;
  return found;
}

std::vector<size_t>
RowOffsets(const std::vector<size_t>& request_rows)
{
  std::vector<size_t> offsets;
  offsets.reserve(request_rows.size());
  size_t next = 0;
  for (size_t rows : request_rows) {
    offsets.push_back(next);
    next += rows;
  }
  return offsets;
}

std::vector<std::pair<size_t, size_t>>
ChunkByRows(const std::vector<size_t>& request_rows, size_t max_rows)
{
  std::vector<std::pair<size_t, size_t>> chunks;
  size_t begin = 0;
  size_t rows = 0;
  for (size_t i = 0; i < request_rows.size(); ++i) {
    if (i > begin && rows + request_rows[i] > max_rows) {
      chunks.emplace_back(begin, i);
      begin = i;
      rows = 0;
    }
    rows += request_rows[i];
  }
  if (begin < request_rows.size()) chunks.emplace_back(begin, request_rows.size());
  return chunks;
}

int64_t
ElementCount(const std::vector<int64_t>& dims)
{
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) return -1;
    if (__builtin_mul_overflow(count, d, &count)) return -1;  // never wraps
  }
  return count;
}

}  // namespace npu_ge
