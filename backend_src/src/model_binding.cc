// BindConfigToModel: the "expected X, got Y" checks of a model configuration
// against the tensors a compiled model declares.
#include <algorithm>

#include "batching.h"
#include "dtype.h"
#include "model_config.h"
#include "triton_utils.h"

namespace npu_ge {
namespace {

std::string
Names(const std::vector<ModelTensorDesc>& tensors)
{
  std::string s;
  for (const auto& t : tensors) s += (s.empty() ? "" : ", ") + t.name;
  return s.empty() ? "none" : s;
}

struct BatchFacts {
  bool any_dynamic = false;
  size_t static_batch = 0;
  const ShapeGears* shape_gears = nullptr;  // the model's dims/image size gears
};

// " (model.om was compiled with dynamic dims gears ...)" for a gear model.
std::string
GearNote(const BatchFacts& facts, const std::string& label)
{
  if (facts.shape_gears == nullptr || facts.shape_gears->empty()) return "";
  return "; " + label + " was compiled with " + facts.shape_gears->Describe();
}

TRITONSERVER_Error*
CheckTensor(
    const ModelConfigSpec& spec, const TensorConfig& cfg, const ModelTensorDesc& model,
    const char* what, const std::string& label, BatchFacts* facts)
{
  if (cfg.dtype == TRITONSERVER_TYPE_BYTES) {
    return NPU_GE_ERROR(
        UNSUPPORTED,
        what << " '" << cfg.name << "': data type BYTES is not supported by .om models");
  }
  if (!model.dtype_known) {
    return NPU_GE_ERROR(
        UNSUPPORTED, what << " '" << cfg.name << "': " << label << " uses "
                          << model.dtype_name << ", which npu_ge cannot serve");
  }
  if (model.dtype != cfg.dtype) {
    return NPU_GE_ERROR(
        INVALID_ARG, what << " '" << cfg.name << "': expected data type "
                          << DataTypeName(model.dtype) << " (as in " << label << "), got "
                          << DataTypeName(cfg.dtype));
  }
  std::vector<int64_t> item_dims = model.dims;
  if (spec.max_batch_size > 0) {
    if (model.dims.empty()) {
      return NPU_GE_ERROR(
          INVALID_ARG, what << " '" << cfg.name << "': max_batch_size is "
                            << spec.max_batch_size << " but " << label
                            << " has no batch dimension (dims [])");
    }
    int64_t batch = model.dims[0];
    if (batch < 0) {
      facts->any_dynamic = true;
    } else if (
        facts->static_batch != 0 && facts->static_batch != static_cast<size_t>(batch)) {
      return NPU_GE_ERROR(
          INVALID_ARG, what << " '" << cfg.name << "': expected batch dimension "
                            << facts->static_batch << " like the other tensors of "
                            << label << ", got " << batch);
    } else {
      facts->static_batch = static_cast<size_t>(batch);
    }
    item_dims.erase(item_dims.begin());
  }
  if (item_dims != cfg.dims) {
    return NPU_GE_ERROR(
        INVALID_ARG,
        what << " '" << cfg.name << "': expected dims " << DimsToString(item_dims) << " ("
             << label << " dims " << DimsToString(model.dims)
             << (spec.max_batch_size > 0 ? " without the batch dimension" : "")
             << "), got " << DimsToString(cfg.dims) << GearNote(*facts, label));
  }
  // Dims the gears vary stay -1: each request's shape picks its gear.
  const bool gears_vary = facts->shape_gears != nullptr && !facts->shape_gears->empty();
  if (ElementCount(item_dims) < 0 && !gears_vary) {
    const bool batch_hint = spec.max_batch_size == 0 && !model.dims.empty() &&
                            model.dims[0] < 0 &&
                            ElementCount({model.dims.begin() + 1, model.dims.end()}) >= 0;
    return NPU_GE_ERROR(
        UNSUPPORTED, what << " '" << cfg.name << "': " << label << " has dynamic dims "
                          << DimsToString(model.dims)
                          << "; only a dynamic batch dimension is supported"
                          << (batch_hint ? " (set max_batch_size > 0 to serve dim 0 as "
                                           "the batch)"
                                         : ""));
  }
  return nullptr;
}

TRITONSERVER_Error*
BindList(
    const ModelConfigSpec& spec, const std::vector<TensorConfig>& cfgs,
    const std::vector<ModelTensorDesc>& model, const char* what, const std::string& label,
    std::vector<size_t>* index, BatchFacts* facts)
{
  if (cfgs.size() != model.size()) {
    return NPU_GE_ERROR(
        INVALID_ARG, "expected " << model.size() << " " << what << "(s) (" << Names(model)
                                 << " in " << label << "), got " << cfgs.size()
                                 << " in the model configuration");
  }
  for (const TensorConfig& cfg : cfgs) {
    auto it = std::find_if(model.begin(), model.end(), [&](const ModelTensorDesc& t) {
      return t.name == cfg.name;
    });
    if (it == model.end()) {
      return NPU_GE_ERROR(
          INVALID_ARG, what << " '" << cfg.name << "' not found in " << label << " (its "
                            << what << "s: " << Names(model) << ")");
    }
    NPU_GE_RETURN_IF_ERROR(CheckTensor(spec, cfg, *it, what, label, facts));
    index->push_back(static_cast<size_t>(it - model.begin()));
  }
  return nullptr;
}

// The gears with their input dims in config input order (config input i is
// model input index[i]).
ShapeGears
ConfigOrderGears(const ShapeGears& model_order, const std::vector<size_t>& index)
{
  ShapeGears gears = model_order;
  for (size_t g = 0; g < gears.input_dims.size(); ++g) {
    for (size_t i = 0; i < index.size(); ++i) {
      gears.input_dims[g][i] = model_order.input_dims[g][index[i]];
    }
  }
  return gears;
}

}  // namespace

bool
IoBinding::ExecRows(size_t rows, size_t* exec_rows) const
{
  if (rows == 0) return false;
  if (exact_rows) {
    *exec_rows = rows;
    return rows <= max_exec_rows;
  }
  if (!gears.empty()) return SelectGear(gears, rows, exec_rows);
  if (static_batch > 0) {
    *exec_rows = static_batch;
    return rows <= static_batch;
  }
  *exec_rows = 1;
  return rows == 1;
}

TRITONSERVER_Error*
BindConfigToModel(
    const ModelConfigSpec& spec, const ModelIoDesc& desc, const std::string& label,
    IoBinding* binding)
{
  IoBinding b;
  BatchFacts facts;
  facts.shape_gears = &desc.shape_gears;
  if (!desc.shape_gears.empty() && spec.max_batch_size != 0) {
    return NPU_GE_ERROR(
        INVALID_ARG, label << " was compiled with " << desc.shape_gears.Describe()
                           << ", which fix every dim (dim 0 included); expected "
                           << "max_batch_size 0, got " << spec.max_batch_size);
  }
  if (!desc.gears.empty() && spec.max_batch_size == 0) {
    return NPU_GE_ERROR(
        INVALID_ARG, label << " was compiled with dynamic batch gears "
                           << DimsToString(desc.gears)
                           << "; expected max_batch_size > 0, got 0");
  }
  // ACL_DYNAMIC_AIPP_NAME (acl_mdl.h): the input ATC adds for dynamic AIPP,
  // whose parameters must be set per execution with aclmdlSetInputAIPP.
  for (const ModelTensorDesc& t : desc.inputs) {
    if (t.name != "ascend_dynamic_aipp_data") continue;
    return NPU_GE_ERROR(
        UNSUPPORTED,
        label << " was compiled with dynamic AIPP (its input " << t.name
              << "; atc --insert_op_conf with aipp_mode: dynamic), whose parameters must "
                 "be "
                 "set for each execution with aclmdlSetInputAIPP; npu_ge does not set "
                 "them: "
                 "compile it with static AIPP (aipp_mode: static) or without AIPP");
  }
  NPU_GE_RETURN_IF_ERROR(
      BindList(spec, spec.inputs, desc.inputs, "input", label, &b.input_index, &facts));
  NPU_GE_RETURN_IF_ERROR(BindList(
      spec, spec.outputs, desc.outputs, "output", label, &b.output_index, &facts));
  const auto mbs = static_cast<size_t>(spec.max_batch_size);
  if (spec.max_batch_size > 0 && facts.any_dynamic) {
    if (desc.gears.empty()) {
      return NPU_GE_ERROR(
          UNSUPPORTED, label << " has a dynamic batch dimension but no batch "
                                "gears; compile it with atc --dynamic_batch_size");
    }
    b.gears = desc.gears;
    std::sort(b.gears.begin(), b.gears.end());
    if (mbs > static_cast<size_t>(b.gears.back())) {
      return NPU_GE_ERROR(
          INVALID_ARG, "expected max_batch_size <= " << b.gears.back()
                                                     << " (largest batch gear of "
                                                     << label << "), got " << mbs);
    }
    b.max_exec_rows = static_cast<size_t>(b.gears.back());
  } else if (spec.max_batch_size > 0) {
    if (mbs > facts.static_batch) {
      return NPU_GE_ERROR(
          INVALID_ARG, "expected max_batch_size <= " << facts.static_batch
                                                     << " (batch dimension of " << label
                                                     << "), got " << mbs);
    }
    b.static_batch = facts.static_batch;
    b.max_exec_rows = facts.static_batch;
  }
  b.shape_gears = ConfigOrderGears(desc.shape_gears, b.input_index);
  *binding = std::move(b);
  return nullptr;
}

}  // namespace npu_ge
