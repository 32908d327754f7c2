#include "auto_complete.h"

#include <algorithm>

#include "dtype.h"
#include "triton_utils.h"

namespace npu_ge {

namespace {

bool
Declared(const JsonValue& config, const char* key)
{
  return config[key].IsArray() && config[key].Size() > 0;
}

// "TYPE_FP32": the model config spelling of a data type.
std::string
ConfigDataType(TRITONSERVER_DataType dtype)
{
  if (dtype == TRITONSERVER_TYPE_BYTES) return "TYPE_STRING";
  return std::string("TYPE_") + DataTypeName(dtype);
}

TRITONSERVER_Error*
TensorList(
    const std::vector<ModelTensorDesc>& tensors, bool strip_batch, const char* what,
    const std::string& model_label, JsonValue* list, std::string* summary)
{
  *list = JsonValue::Array();
  for (const ModelTensorDesc& t : tensors) {
    if (!t.dtype_known) {
      return NPU_GE_ERROR(
          UNSUPPORTED, "cannot auto-complete " << what << " '" << t.name
                                               << "': " << model_label << " data type "
                                               << t.dtype_name
                                               << " has no Triton equivalent; declare "
                                                  "the "
                                               << what << "s in config.pbtxt");
    }
    std::vector<int64_t> dims = t.dims;
    if (strip_batch && !dims.empty()) dims.erase(dims.begin());
    JsonValue dims_json = JsonValue::Array();
    for (int64_t d : dims) dims_json.Append(JsonValue::Number(d));
    JsonValue tensor = JsonValue::Object();
    tensor.Set("name", JsonValue::String(t.name));
    tensor.Set("data_type", JsonValue::String(ConfigDataType(t.dtype)));
    tensor.Set("dims", std::move(dims_json));
    list->Append(std::move(tensor));
    *summary += std::string(summary->empty() ? "" : ", ") + what + " " + t.name + " " +
                DataTypeName(t.dtype) + " " + DimsToString(dims);
  }
  return nullptr;
}

}  // namespace

bool
ConfigNeedsAutoComplete(const JsonValue& config)
{
  return !Declared(config, "input") || !Declared(config, "output");
}

TRITONSERVER_Error*
AutoCompleteConfig(
    const JsonValue& config, const ModelIoDesc& io, const std::string& model_label,
    JsonValue* completed, std::string* summary)
{
  JsonValue out = config;
  std::string added;
  int64_t mbs = 0;
  if (config.Has("max_batch_size") && !config["max_batch_size"].AsInt64(&mbs)) {
    return NPU_GE_ERROR(INVALID_ARG, "max_batch_size must be an integer");
  }
  if (mbs == 0 && !io.gears.empty()) {
    mbs = *std::max_element(io.gears.begin(), io.gears.end());
    out.Set("max_batch_size", JsonValue::Number(mbs));
    added = "max_batch_size " + std::to_string(mbs);
  }
  const bool strip_batch = mbs > 0;
  if (!Declared(config, "input")) {
    JsonValue list;
    NPU_GE_RETURN_IF_ERROR(
        TensorList(io.inputs, strip_batch, "input", model_label, &list, &added));
    out.Set("input", std::move(list));
  }
  if (!Declared(config, "output")) {
    JsonValue list;
    NPU_GE_RETURN_IF_ERROR(
        TensorList(io.outputs, strip_batch, "output", model_label, &list, &added));
    out.Set("output", std::move(list));
  }
  *completed = std::move(out);
  *summary = added;
  return nullptr;
}

}  // namespace npu_ge
