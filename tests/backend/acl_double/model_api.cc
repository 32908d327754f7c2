// TEST DOUBLE: the model API (aclmdl*) of the ACL runtime double. Linked into
// the one-library layout (acl_double/libascendcl.so, as CANN 8 ships it) and,
// alone, into CANN 9's split layout (acl_double_split/libacl_mdl.so beside a
// libascendcl.so without it). Both layouts keep one state: the globals of
// acl_double.cc (runtime_state.h, models.h).
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "acl/acl.h"
#include "model_file.h"
#include "models.h"
#include "runtime_state.h"

using acl_double::Fail;
using acl_double::g_data_buffers;
using acl_double::g_datasets;
using acl_double::g_descs;
using acl_double::g_model_loads;
using acl_double::g_models;
using acl_double::g_mu;
using acl_double::g_next_model_id;
using acl_double::IoView;
using acl_double::LoadedModel;
using acl_double::ModelSpec;
using acl_double::ShouldFail;
using acl_double::WriteStateLocked;

// ---- offline models --------------------------------------------------------
namespace {

aclError
FillDims(const acl_double::TensorSpec& t, aclmdlIODims* dims)
{
  std::memset(dims, 0, sizeof(*dims));
  std::snprintf(dims->name, sizeof(dims->name), "%s", t.name.c_str());
  dims->dimCount = t.dims.size();
  for (size_t d = 0; d < t.dims.size(); ++d) dims->dims[d] = t.dims[d];
  return ACL_SUCCESS;
}

// Bytes of tensor `t` at the model's largest gear. With dims or image size
// gears its shape is that of input `input` in the last gear (outputs have
// their first input's elements per row).
size_t
LargestGearBytes(const ModelSpec& s, const acl_double::TensorSpec& t, size_t input)
{
  const size_t gears = s.dims_gears.size() + s.hw_gears.size();
  if (gears == 0) return s.TensorBytes(t, s.MaxRows());
  size_t n = 1;
  for (int64_t d : s.DimsInGear(input, gears - 1)) n *= static_cast<size_t>(d);
  return n * acl_double::DtypeSize(t.dtype);
}

}  // namespace

extern "C" {

aclmdlDesc*
aclmdlCreateDesc()
{
  std::lock_guard<std::mutex> lock(g_mu);
  if (ShouldFail("aclmdlCreateDesc")) return nullptr;
  aclmdlDesc* d = new aclmdlDesc();
  g_descs.insert(d);
  WriteStateLocked();
  return d;
}

aclError
aclmdlDestroyDesc(aclmdlDesc* desc)
{
  DOUBLE_ENTER("aclmdlDestroyDesc");
  if (g_descs.erase(desc) == 0)
    return Fail(ACL_ERROR_INVALID_PARAM, "unknown model desc");
  delete desc;
  WriteStateLocked();
  return ACL_SUCCESS;
}

// CANN 8.0's API reference lists aclmdlGetDescFromFile as not supported on
// any Atlas product family: the double behaves like that product (exported,
// always failing), so a backend relying on it fails every load here too.
aclError
aclmdlGetDescFromFile(aclmdlDesc* desc, const char* path)
{
  DOUBLE_ENTER("aclmdlGetDescFromFile");
  (void)desc;
  return Fail(
      ACL_ERROR_API_NOT_SUPPORT,
      std::string(
          "aclmdlGetDescFromFile is not supported on this product (as on "
          "Atlas products with CANN 8.0); load the model and use "
          "aclmdlGetDesc: ") +
          path);
}

aclError
aclmdlGetDesc(aclmdlDesc* desc, uint32_t model_id)
{
  DOUBLE_ENTER("aclmdlGetDesc");
  if (g_descs.count(desc) == 0)
    return Fail(ACL_ERROR_INVALID_PARAM, "unknown model desc");
  auto it = g_models.find(model_id);
  if (it == g_models.end()) return Fail(ACL_ERROR_INVALID_MODEL_ID, "unknown model id");
  desc->spec = *it->second.spec;
  desc->of_model = true;
  desc->model_id = model_id;
  return ACL_SUCCESS;
}

aclError
aclmdlQuerySize(const char* path, size_t* work, size_t* weight)
{
  DOUBLE_ENTER("aclmdlQuerySize");
  ModelSpec spec;
  std::string error;
  if (!acl_double::LoadModelSpec(path, &spec, &error)) {
    return Fail(ACL_ERROR_READ_MODEL_FAILURE, error);
  }
  *work = 0;
  *weight = spec.weight_bytes;
  return ACL_SUCCESS;
}

aclError
aclmdlLoadFromFile(const char* path, uint32_t* model_id)
{
  DOUBLE_ENTER("aclmdlLoadFromFile");
  DOUBLE_NEED_DEVICE("aclmdlLoadFromFile");
  ModelSpec spec;
  std::string error;
  if (!acl_double::LoadModelSpec(path, &spec, &error)) {
    return Fail(ACL_ERROR_READ_MODEL_FAILURE, error);
  }
  if (spec.fail_load) {
    return Fail(ACL_ERROR_RT_PARAM_INVALID, std::string("fail_load set in ") + path);
  }
  *model_id = g_next_model_id++;
  ++g_model_loads;
  g_models[*model_id] =
      LoadedModel{std::make_shared<const ModelSpec>(std::move(spec)), device, -1};
  WriteStateLocked();
  return ACL_SUCCESS;
}

aclError
aclmdlUnload(uint32_t model_id)
{
  DOUBLE_ENTER("aclmdlUnload");
  if (g_models.erase(model_id) == 0)
    return Fail(ACL_ERROR_INVALID_MODEL_ID, "unknown model id");
  WriteStateLocked();
  return ACL_SUCCESS;
}

size_t
aclmdlGetNumInputs(aclmdlDesc* desc)
{
  return IoView{desc->spec}.NumInputs();
}

size_t
aclmdlGetNumOutputs(aclmdlDesc* desc)
{
  return desc->spec.outputs.size();
}

const char*
aclmdlGetInputNameByIndex(const aclmdlDesc* desc, size_t i)
{
  IoView io{desc->spec};
  if (io.IsDynamicInput(i)) return ACL_DYNAMIC_TENSOR_NAME;
  return i < desc->spec.inputs.size() ? desc->spec.inputs[i].name.c_str() : "";
}

const char*
aclmdlGetOutputNameByIndex(const aclmdlDesc* desc, size_t i)
{
  return i < desc->spec.outputs.size() ? desc->spec.outputs[i].name.c_str() : "";
}

aclError
aclmdlGetInputDims(const aclmdlDesc* desc, size_t i, aclmdlIODims* dims)
{
  if (i >= desc->spec.inputs.size()) {
    if (IoView{desc->spec}.IsDynamicInput(i)) {
      return FillDims(
          acl_double::TensorSpec{ACL_DYNAMIC_TENSOR_NAME, ACL_INT64, {1}, {}}, dims);
    }
    return Fail(ACL_ERROR_INVALID_PARAM, "input index out of range");
  }
  const acl_double::TensorSpec& t = desc->spec.inputs[i];
  if (t.image_dims.empty()) return FillDims(t, dims);
  // CANN: for a static-AIPP input, the dims of the input image (for YUV420SP
  // n,h,w,c), which need not multiply out to aclmdlGetInputSizeByIndex.
  return FillDims(acl_double::TensorSpec{t.name, t.dtype, t.image_dims, {}}, dims);
}

// CANN: dims whose product is aclmdlGetInputSizeByIndex's (for YUV420SP
// n,h*1.5,w,1): here the input's declared (real) layout.
aclError
aclmdlGetInputDimsV2(const aclmdlDesc* desc, size_t i, aclmdlIODims* dims)
{
  if (i >= desc->spec.inputs.size()) return aclmdlGetInputDims(desc, i, dims);
  return FillDims(desc->spec.inputs[i], dims);
}

aclError
aclmdlGetOutputDims(const aclmdlDesc* desc, size_t i, aclmdlIODims* dims)
{
  const ModelSpec& s = desc->spec;
  if (i >= s.outputs.size())
    return Fail(ACL_ERROR_INVALID_PARAM, "output index out of range");
  aclError rc = FillDims(s.outputs[i], dims);
  if (s.outputs_at_largest_gear && dims->dimCount > 0 && dims->dims[0] < 0) {
    dims->dims[0] = static_cast<int64_t>(s.MaxRows());
  }
  return rc;
}

aclDataType
aclmdlGetInputDataType(const aclmdlDesc* desc, size_t i)
{
  if (IoView{desc->spec}.IsDynamicInput(i)) return ACL_INT64;
  return i < desc->spec.inputs.size() ? desc->spec.inputs[i].dtype : ACL_DT_UNDEFINED;
}

aclDataType
aclmdlGetOutputDataType(const aclmdlDesc* desc, size_t i)
{
  return i < desc->spec.outputs.size() ? desc->spec.outputs[i].dtype : ACL_DT_UNDEFINED;
}

size_t
aclmdlGetInputSizeByIndex(aclmdlDesc* desc, size_t i)
{
  const ModelSpec& s = desc->spec;
  if (IoView{s}.IsDynamicInput(i)) return sizeof(uint64_t);
  if (i >= s.inputs.size()) return 0;
  return LargestGearBytes(s, s.inputs[i], i);
}

size_t
aclmdlGetOutputSizeByIndex(aclmdlDesc* desc, size_t i)
{
  const ModelSpec& s = desc->spec;
  if (i >= s.outputs.size()) return 0;
  return LargestGearBytes(s, s.outputs[i], s.outputs[i].from[0]);
}

aclError
aclmdlGetDynamicBatch(const aclmdlDesc* desc, aclmdlBatch* batch)
{
  std::memset(batch, 0, sizeof(*batch));
  batch->batchCount = desc->spec.gears.size();
  for (size_t g = 0; g < desc->spec.gears.size() && g < ACL_MAX_BATCH_NUM; ++g) {
    batch->batch[g] = desc->spec.gears[g];
  }
  return ACL_SUCCESS;
}

// Dims gears: every gear is the dims of the inputs named in atc --input_shape
// (dynamic_dims_order), concatenated in that order; aclmdlIODims.name is
// reserved (CANN 6.0.1 / 8.0.0 references) and left empty.
aclError
aclmdlGetInputDynamicGearCount(const aclmdlDesc* desc, size_t index, size_t* count)
{
  if (index != static_cast<size_t>(-1)) {
    return Fail(ACL_ERROR_INVALID_PARAM, "index is reserved: pass -1");
  }
  *count = desc->spec.dims_gears.size();
  return ACL_SUCCESS;
}

aclError
aclmdlGetInputDynamicDims(
    const aclmdlDesc* desc, size_t index, aclmdlIODims* dims, size_t count)
{
  const ModelSpec& s = desc->spec;
  if (index != static_cast<size_t>(-1) || count != s.dims_gears.size()) {
    return Fail(ACL_ERROR_INVALID_PARAM, "index must be -1 and count the gear count");
  }
  for (size_t g = 0; g < count; ++g) {
    std::memset(&dims[g], 0, sizeof(dims[g]));
    for (int64_t d : s.DimsGearList(g)) dims[g].dims[dims[g].dimCount++] = d;
  }
  return ACL_SUCCESS;
}

aclError
aclmdlGetDynamicHW(const aclmdlDesc* desc, size_t index, aclmdlHW* hw)
{
  (void)index;  // -1: the model's image size gears
  std::memset(hw, 0, sizeof(*hw));
  hw->hwCount = desc->spec.hw_gears.size();
  for (size_t g = 0; g < hw->hwCount && g < ACL_MAX_HW_NUM; ++g) {
    hw->hw[g][0] = desc->spec.hw_gears[g].first;
    hw->hw[g][1] = desc->spec.hw_gears[g].second;
  }
  return ACL_SUCCESS;
}

aclmdlDataset*
aclmdlCreateDataset()
{
  std::lock_guard<std::mutex> lock(g_mu);
  aclmdlDataset* ds = new aclmdlDataset();
  g_datasets.insert(ds);
  WriteStateLocked();
  return ds;
}

aclError
aclmdlDestroyDataset(const aclmdlDataset* dataset)
{
  DOUBLE_ENTER("aclmdlDestroyDataset");
  aclmdlDataset* ds = const_cast<aclmdlDataset*>(dataset);
  if (g_datasets.erase(ds) == 0) return Fail(ACL_ERROR_INVALID_PARAM, "unknown dataset");
  delete ds;  // like ACL: the data buffers are not freed
  WriteStateLocked();
  return ACL_SUCCESS;
}

aclError
aclmdlAddDatasetBuffer(aclmdlDataset* dataset, aclDataBuffer* buffer)
{
  DOUBLE_ENTER("aclmdlAddDatasetBuffer");
  if (g_datasets.count(dataset) == 0 || g_data_buffers.count(buffer) == 0) {
    return Fail(ACL_ERROR_INVALID_PARAM, "unknown dataset or data buffer");
  }
  dataset->buffers.push_back(buffer);
  return ACL_SUCCESS;
}

aclError
aclmdlSetDynamicBatchSize(
    uint32_t model_id, aclmdlDataset* dataset, size_t index, uint64_t batch)
{
  DOUBLE_ENTER("aclmdlSetDynamicBatchSize");
  auto it = g_models.find(model_id);
  if (it == g_models.end()) return Fail(ACL_ERROR_INVALID_MODEL_ID, "unknown model id");
  const ModelSpec& s = *it->second.spec;
  if (!IoView{s}.IsDynamicInput(index)) {
    return Fail(ACL_ERROR_INVALID_PARAM, "index is not the dynamic batch input");
  }
  bool is_gear = false;
  for (uint64_t g : s.gears) is_gear = is_gear || g == batch;
  if (!is_gear) {
    return Fail(
        ACL_ERROR_INVALID_PARAM, "batch " + std::to_string(batch) + " is not a gear");
  }
  if (g_datasets.count(dataset) == 0)
    return Fail(ACL_ERROR_INVALID_PARAM, "unknown dataset");
  dataset->dynamic_batch = batch;
  return ACL_SUCCESS;
}

aclError
aclmdlGetInputIndexByName(const aclmdlDesc* desc, const char* name, size_t* index)
{
  DOUBLE_ENTER("aclmdlGetInputIndexByName");
  IoView io{desc->spec};
  for (size_t i = 0; i < io.NumInputs(); ++i) {
    if (std::strcmp(aclmdlGetInputNameByIndex(desc, i), name) == 0) {
      *index = i;
      return ACL_SUCCESS;
    }
  }
  return Fail(ACL_ERROR_INVALID_PARAM, std::string("no input named ") + name);
}

}  // extern "C"

namespace {

// Checks what CANN checks before a shape gear is set on `dataset`: the model,
// that `index` is its dynamic-shape input, the dataset. Returns the model.
aclError
ShapeGearTarget(
    uint32_t model_id, const aclmdlDataset* dataset, size_t index, LoadedModel** model)
{
  auto it = g_models.find(model_id);
  if (it == g_models.end()) return Fail(ACL_ERROR_INVALID_MODEL_ID, "unknown model id");
  if (!IoView{*it->second.spec}.IsDynamicInput(index)) {
    return Fail(ACL_ERROR_INVALID_PARAM, "index is not the dynamic-shape input");
  }
  if (g_datasets.count(const_cast<aclmdlDataset*>(dataset)) == 0) {
    return Fail(ACL_ERROR_INVALID_PARAM, "unknown dataset");
  }
  *model = &it->second;
  return ACL_SUCCESS;
}

// Records gear `g` (or fails when the value matches no gear, g < 0).
aclError
RecordShapeGear(
    LoadedModel* model, aclmdlDataset* dataset, int64_t g, const std::string& what)
{
  if (g < 0) return Fail(ACL_ERROR_INVALID_PARAM, what + " is not a gear of the model");
  dataset->shape_gear = g;
  model->last_shape_gear = g;
  return ACL_SUCCESS;
}

}  // namespace

extern "C" {

aclError
aclmdlSetInputDynamicDims(
    uint32_t model_id, aclmdlDataset* dataset, size_t index, const aclmdlIODims* dims)
{
  DOUBLE_ENTER("aclmdlSetInputDynamicDims");
  LoadedModel* m = nullptr;
  aclError rc = ShapeGearTarget(model_id, dataset, index, &m);
  if (rc != ACL_SUCCESS) return rc;
  const ModelSpec& s = *m->spec;
  std::vector<int64_t> given(dims->dims, dims->dims + dims->dimCount);
  int64_t found = -1;
  for (size_t g = 0; g < s.dims_gears.size() && found < 0; ++g) {
    if (s.DimsGearList(g) == given) found = static_cast<int64_t>(g);  // CANN's order
  }
  std::string text;
  for (int64_t d : given) text += (text.empty() ? "" : ",") + std::to_string(d);
  return RecordShapeGear(m, dataset, found, "dims [" + text + "]");
}

aclError
aclmdlSetDynamicHWSize(
    uint32_t model_id, aclmdlDataset* dataset, size_t index, uint64_t height,
    uint64_t width)
{
  DOUBLE_ENTER("aclmdlSetDynamicHWSize");
  LoadedModel* m = nullptr;
  aclError rc = ShapeGearTarget(model_id, dataset, index, &m);
  if (rc != ACL_SUCCESS) return rc;
  int64_t found = -1;
  for (size_t g = 0; g < m->spec->hw_gears.size() && found < 0; ++g) {
    if (m->spec->hw_gears[g] == std::make_pair(height, width))
      found = static_cast<int64_t>(g);
  }
  return RecordShapeGear(
      m, dataset, found,
      "image size " + std::to_string(height) + "x" + std::to_string(width));
}

// Output dims follow their first input's gear dims; before any gear is set,
// the largest gear (what CANN reports while no dynamic info is set).
aclError
aclmdlGetCurOutputDims(const aclmdlDesc* desc, size_t index, aclmdlIODims* dims)
{
  DOUBLE_ENTER("aclmdlGetCurOutputDims");
  if (g_descs.count(const_cast<aclmdlDesc*>(desc)) == 0 || !desc->of_model) {
    return Fail(ACL_ERROR_INVALID_PARAM, "desc not filled by aclmdlGetDesc");
  }
  auto it = g_models.find(desc->model_id);
  if (it == g_models.end()) return Fail(ACL_ERROR_INVALID_MODEL_ID, "model unloaded");
  const ModelSpec& s = *it->second.spec;
  if (index >= s.outputs.size()) {
    return Fail(ACL_ERROR_INVALID_PARAM, "output index out of range");
  }
  const acl_double::OutputSpec& out = s.outputs[index];
  FillDims(out, dims);
  if (s.ShapeGearCount() == 0) return ACL_SUCCESS;
  const int64_t g = it->second.last_shape_gear;
  const size_t gear = g < 0 ? s.ShapeGearCount() - 1 : static_cast<size_t>(g);
  const std::vector<int64_t> shaped = s.DimsInGear(out.from[0], gear);
  dims->dimCount = shaped.size();
  for (size_t d = 0; d < shaped.size(); ++d) dims->dims[d] = shaped[d];
  return ACL_SUCCESS;
}

}  // extern "C"
