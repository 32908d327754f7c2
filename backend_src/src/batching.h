// Batch arithmetic: gear selection for .om models compiled with dynamic batch
// gears, row offsets of the requests inside a batch, chunking of a request
// list into executions. Pure functions, unit-tested.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace npu_ge {

// Smallest gear >= rows; false when rows exceeds every gear.
bool SelectGear(const std::vector<int64_t>& gears, size_t rows, size_t* gear);

// Starting row of each request when requests are stacked in order.
std::vector<size_t> RowOffsets(const std::vector<size_t>& request_rows);

// Splits requests (given their row counts) into consecutive groups whose
// total rows do not exceed max_rows. A request larger than max_rows gets a
// group of its own (the caller rejects it). Returns [begin, end) pairs.
std::vector<std::pair<size_t, size_t>> ChunkByRows(
    const std::vector<size_t>& request_rows, size_t max_rows);

// Product of dims; -1 when any dim is negative or the product overflows
// int64 (a file cannot make it wrap), 1 for a scalar.
int64_t ElementCount(const std::vector<int64_t>& dims);

}  // namespace npu_ge
