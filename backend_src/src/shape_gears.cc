// Dims and image size gears (atc --dynamic_dims / --dynamic_image_size):
// which full input dims each gear stands for, what a config may declare for
// them, and which gear a request's shapes pick. Pure logic, unit-tested.
#include "batching.h"
#include "model_config.h"
#include "triton_utils.h"

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

// Searches the orders of inputs a dims gear list can stand for.
class DimsGearOrders {
 public:
  DimsGearOrders(
      const std::vector<ModelTensorDesc>& inputs,
      const std::vector<std::vector<int64_t>>& values)
      : inputs_(inputs), values_(values), used_(inputs.size(), false)
  {
  }
  std::vector<std::vector<size_t>> Find()
  {
    Search(0);
    return found_;
  }

 private:
  // Input `i` can stand at position `pos` of every gear list.
  bool Fits(size_t i, size_t pos) const
  {
    const std::vector<int64_t>& dims = inputs_[i].dims;
    for (const std::vector<int64_t>& gear : values_) {
      if (pos + dims.size() > gear.size()) return false;
      for (size_t d = 0; d < dims.size(); ++d) {
        const int64_t v = gear[pos + d];
        if (dims[d] >= 0 ? v != dims[d] : v < 1) return false;
      }
    }
    return true;
  }
  void Search(size_t pos)
  {
    if (found_.size() >= kMaxOrders) return;
    if (pos == values_[0].size()) {
      bool every_dynamic = true;
      for (size_t i = 0; i < inputs_.size(); ++i) {
        every_dynamic = every_dynamic && (used_[i] || ElementCount(inputs_[i].dims) >= 0);
      }
      if (every_dynamic) found_.push_back(current_);
      return;
    }
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (used_[i] || inputs_[i].dims.empty() || !Fits(i, pos)) continue;
      used_[i] = true;
      current_.push_back(i);
      Search(pos + inputs_[i].dims.size());
      current_.pop_back();
      used_[i] = false;
    }
  }
  static constexpr size_t kMaxOrders = 64;
  const std::vector<ModelTensorDesc>& inputs_;
  const std::vector<std::vector<int64_t>>& values_;
  std::vector<bool> used_;
  std::vector<size_t> current_;
  std::vector<std::vector<size_t>> found_;
};

std::string
InputsText(const std::vector<ModelTensorDesc>& inputs, const std::vector<size_t>& order)
{
  std::string text;
  for (size_t i : order) {
    text +=
        (text.empty() ? "" : ", ") + inputs[i].name + " " + DimsToString(inputs[i].dims);
  }
  return text;
}

std::vector<std::vector<int64_t>>
DimsOf(const std::vector<ModelTensorDesc>& inputs)
{
  std::vector<std::vector<int64_t>> dims;
  for (const ModelTensorDesc& t : inputs) dims.push_back(t.dims);
  return dims;
}

}  // namespace

TRITONSERVER_Error*
BindDimsGearList(
    const std::vector<ModelTensorDesc>& inputs,
    const std::vector<std::vector<int64_t>>& values, std::vector<size_t>* listed)
{
  std::vector<size_t> model_order;
  for (size_t i = 0; i < inputs.size(); ++i) model_order.push_back(i);
  ShapeGears probe;
  probe.kind = ShapeGearKind::kDims;
  probe.values = values;
  const std::string described = probe.Describe();
  for (const std::vector<int64_t>& gear : values) {
    if (gear.size() != values[0].size()) {
      return NPU_GE_ERROR(
          UNSUPPORTED, "its " << described << " list gears of different lengths");
    }
  }
  const std::vector<std::vector<size_t>> orders = DimsGearOrders(inputs, values).Find();
  const std::vector<std::vector<int64_t>> dims = DimsOf(inputs);
  std::vector<std::vector<size_t>> distinct;  // orders with different results
  for (const std::vector<size_t>& order : orders) {
    bool seen = false;
    for (const std::vector<size_t>& d : distinct) {
      seen = seen ||
             MakeShapeGears(ShapeGearKind::kDims, dims, values, d).input_dims ==
                 MakeShapeGears(ShapeGearKind::kDims, dims, values, order).input_dims;
    }
    if (!seen) distinct.push_back(order);
  }
  const std::string how =
      "; CANN lists, per gear, the full dims of the inputs named in atc --input_shape in "
      "that order, without their names";
  if (distinct.empty()) {
    return NPU_GE_ERROR(
        UNSUPPORTED, "its " << described << " cannot be bound to its inputs "
                            << InputsText(inputs, model_order)
                            << " (model order) in any order" << how
                            << ": compile it with --input_shape naming every input that "
                               "has a -1");
  }
  if (distinct.size() == 1) {
    *listed = distinct[0];
    return nullptr;
  }
  for (const std::vector<size_t>& order : orders) {
    if (order == model_order) {  // ambiguous: --input_shape is usually in model order
      *listed = order;
      return nullptr;
    }
  }
  return NPU_GE_ERROR(
      UNSUPPORTED,
      "its " << described << " can be bound to its inputs in more than one "
             << "order with different shapes (" << InputsText(inputs, distinct[0])
             << "; or " << InputsText(inputs, distinct[1])
             << "), none of them the model order " << InputsText(inputs, model_order)
             << how
             << ": compile it with --input_shape listing the inputs in model "
                "order");
}

ShapeGears
MakeShapeGears(
    ShapeGearKind kind, const std::vector<std::vector<int64_t>>& model_input_dims,
    const std::vector<std::vector<int64_t>>& values, const std::vector<size_t>& listed)
{
  ShapeGears gears;
  gears.kind = kind;
  gears.values = values;
  for (const std::vector<int64_t>& gear : values) {
    std::vector<std::vector<int64_t>> dims = model_input_dims;
    if (kind == ShapeGearKind::kImageSize) {
      for (std::vector<int64_t>& input : dims) input = FillImageSize(input, gear);
    } else {
      size_t pos = 0;
      for (size_t i : listed) {
        for (int64_t& d : dims[i]) d = pos < gear.size() ? gear[pos++] : d;
      }
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

TRITONSERVER_Error*
ApplyShapeGears(
    ShapeGearKind kind, const std::vector<std::vector<int64_t>>& values, ModelIoDesc* io)
{
  std::vector<size_t> listed;
  if (kind == ShapeGearKind::kDims && !values.empty()) {
    NPU_GE_RETURN_IF_ERROR(BindDimsGearList(io->inputs, values, &listed));
  }
  const std::vector<std::vector<int64_t>> dims = DimsOf(io->inputs);
  io->shape_gears = MakeShapeGears(kind, dims, values, listed);
  for (size_t i = 0; i < io->inputs.size(); ++i) {
    io->inputs[i].dims = DimsAcrossGears(io->shape_gears, i, dims[i]);
  }
  return nullptr;
}

}  // namespace npu_ge
