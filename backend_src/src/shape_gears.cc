// Dims and image size gears (atc --dynamic_dims / --dynamic_image_size):
// which full input dims each gear stands for, what a config may declare for
// them, and which gear a request's shapes pick. Pure logic, unit-tested.
#include "model_config.h"

namespace npu_ge {

std::string
ShapeGears::Describe() const
{
  const bool image = kind == ShapeGearKind::kImageSize;
  std::string list;
  for (size_t g = 0; g < values.size(); ++g) {
    if (g > 0) list += ", ";
    list += image && values[g].size() == 2
                ? std::to_string(values[g][0]) + "x" + std::to_string(values[g][1])
                : DimsToString(values[g]);
  }
  return image ? "dynamic image size gears [" + list + "] (atc --dynamic_image_size)"
               : "dynamic dims gears " + list + " (atc --dynamic_dims)";
}

namespace {

// Image size gear {H, W}: fills the two -1 dims (H, W) of one input's dims.
std::vector<int64_t>
FillImageSize(std::vector<int64_t> dims, const std::vector<int64_t>& hw)
{
  size_t next = 0;
  for (int64_t& d : dims) {
    if (d < 0 && next < hw.size()) d = hw[next++];
  }
  return dims;
}

// Dims gear: CANN lists every input's full dims, concatenated in input
// order; `*pos` walks that list.
std::vector<int64_t>
TakeInputDims(size_t rank, const std::vector<int64_t>& all, size_t* pos)
{
  std::vector<int64_t> dims;
  for (size_t d = 0; d < rank && *pos < all.size(); ++d) dims.push_back(all[(*pos)++]);
  return dims;
}

}  // namespace

ShapeGears
MakeShapeGears(
    ShapeGearKind kind, const std::vector<std::vector<int64_t>>& model_input_dims,
    const std::vector<std::vector<int64_t>>& values)
{
  ShapeGears gears;
  gears.kind = kind;
  gears.values = values;
  for (const std::vector<int64_t>& gear : values) {
    std::vector<std::vector<int64_t>> dims;
    size_t pos = 0;
    for (const std::vector<int64_t>& input : model_input_dims) {
      dims.push_back(
          kind == ShapeGearKind::kImageSize ? FillImageSize(input, gear)
                                            : TakeInputDims(input.size(), gear, &pos));
    }
    gears.input_dims.push_back(std::move(dims));
  }
  return gears;
}

std::vector<int64_t>
DimsAcrossGears(const ShapeGears& gears, size_t input, const std::vector<int64_t>& dims)
{
  std::vector<int64_t> out = dims;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] >= 0 || gears.input_dims.empty()) continue;
    const int64_t first = gears.input_dims[0][input][d];
    bool same = true;
    for (const auto& gear : gears.input_dims) same = same && gear[input][d] == first;
    if (same && first >= 0) out[d] = first;
  }
  return out;
}

bool
MatchShapeGear(
    const ShapeGears& gears, const std::vector<std::vector<int64_t>>& shapes,
    size_t* gear)
{
  for (size_t g = 0; g < gears.input_dims.size(); ++g) {
    if (gears.input_dims[g] == shapes) {
      *gear = g;
      return true;
    }
  }
  return false;
}

void
ApplyShapeGears(
    ShapeGearKind kind, const std::vector<std::vector<int64_t>>& values, ModelIoDesc* io)
{
  std::vector<std::vector<int64_t>> dims;
  for (const ModelTensorDesc& t : io->inputs) dims.push_back(t.dims);
  io->shape_gears = MakeShapeGears(kind, dims, values);
  for (size_t i = 0; i < io->inputs.size(); ++i) {
    io->inputs[i].dims = DimsAcrossGears(io->shape_gears, i, dims[i]);
  }
}

}  // namespace npu_ge
