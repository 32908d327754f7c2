// The validated facts of a model configuration, and the check of those facts
// against what the compiled model itself declares. Pure logic over JSON (no
// Triton calls besides TRITONSERVER_ErrorNew), unit-tested.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "json.h"
#include "npu_ge/triton_api.h"

namespace npu_ge {

enum class EngineKind { kAclOm, kGeGraph };
const char* EngineKindName(EngineKind kind);

struct TensorConfig {
  std::string name;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> dims;  // per request, without the batch dimension
  // Bytes of one batch row; 0 when dims hold a -1 (a dims / image size gear
  // tensor): its rows are sized from each request's shape instead.
  size_t RowBytes() const;
};

struct ModelConfigSpec {
  std::string name;
  int64_t max_batch_size = 0;
  std::vector<TensorConfig> inputs;
  std::vector<TensorConfig> outputs;
  std::vector<int32_t> device_ids;  // empty: use the backend default
  EngineKind engine = EngineKind::kAclOm;
  bool engine_set = false;          // 'engine' or 'EXECUTOR_TYPE' given
  std::string engine_key;           // the key the user wrote ("engine", "EXECUTOR_TYPE")
  std::string engine_value;         // its value, as written
  bool model_filename_set = false;  // default_model_filename given
  std::string model_filename;       // file inside <model>/<version>/
  std::map<std::string, std::string> options;  // other parameters (ge.* ...)
  std::vector<std::string> warnings;           // to be logged at load
  // Host path (acl_om): parameters 'execute_timeout_ms' (a stuck execute is
  // abandoned after this long and the instance rebuilt) and 'copy_overlap'
  // (two buffer sets, so batch N+1's copy-in runs while batch N executes).
  int64_t execute_timeout_ms = 60000;
  bool copy_overlap = true;
};

struct BackendConfigSpec {
  std::vector<int32_t> default_device_ids{0};
  int64_t telemetry_interval_ms = 1000;
  // --backend-config=npu_ge,ge.<key>=<value> and global.<key>=<value> (the
  // public GE backend's scope for the same): GE global options (GEInitialize)
  // for engine ge_graph.
  std::map<std::string, std::string> ge_options;
  // --backend-config=npu_ge,session.<key> / graph.<key>: session and graph
  // options of every ge_graph model (a model's own session.* / graph.*
  // parameter wins for that model).
  std::map<std::string, std::string> ge_session_options;
  std::map<std::string, std::string> ge_graph_options;
  std::vector<std::string> warnings;  // to be logged at backend init
};

// "0,1, 3" -> {0,1,3}. Rejects empty lists, negatives and non-numbers.
TRITONSERVER_Error* ParseDeviceIds(const std::string& text, std::vector<int32_t>* ids);

// Reads Triton's model configuration JSON. With require_io false a config
// without inputs or outputs is accepted (to be auto-completed from the model).
TRITONSERVER_Error* ParseModelConfig(
    const JsonValue& config, ModelConfigSpec* spec, bool require_io = true);
// "expected at least one input ... got none" unless inputs and outputs exist.
TRITONSERVER_Error* CheckTensorsDeclared(const ModelConfigSpec& spec);

// Picks the engine and model file from the regular files of the version
// directory ('files', names only) when the config names neither, as the
// older GE backend's repositories expect: model.om -> acl_om; else model.onnx,
// or the only *.onnx file -> ge_graph (said in 'note'). Refuses ge_graph in a
// build without it ('have_ge_graph'), naming what the user wrote and what to do.
// Whether `files` (one directory's) hold something ResolveModelFile would
// serve: the configured model file, or (with neither 'engine' nor
// default_model_filename set) any *.onnx or model.pb.
bool HoldsModelFile(const std::vector<std::string>& files, const ModelConfigSpec& spec);

TRITONSERVER_Error* ResolveModelFile(
    const std::vector<std::string>& files, bool have_ge_graph, ModelConfigSpec* spec,
    std::string* note);

// Reads TRITONBACKEND_BackendConfig JSON ({"cmdline": {...}}). With
// have_ge_graph false, ge.* keys are kept but warned about (nothing can use
// them); keys npu_ge does not know are errors.
TRITONSERVER_Error* ParseBackendConfig(
    const JsonValue& config, BackendConfigSpec* spec, bool have_ge_graph = true);

// What a compiled model (.om description) declares about one tensor.
struct ModelTensorDesc {
  std::string name;
  bool dtype_known = true;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::string dtype_name;     // as the model spells it (for messages)
  std::vector<int64_t> dims;  // full dims, batch dim included if any
  size_t byte_size = 0;       // size for the largest batch
};

// Gears of an .om model beyond the batch: atc --dynamic_dims (each gear
// fixes the -1 dims of all inputs) or --dynamic_image_size (each gear an H,W).
enum class ShapeGearKind { kNone, kDims, kImageSize };

struct ShapeGears {
  ShapeGearKind kind = ShapeGearKind::kNone;
  // Per gear, the full dims of every model input (ModelIoDesc.inputs order).
  std::vector<std::vector<std::vector<int64_t>>> input_dims;
  // Per gear, what CANN is told: the dims of the inputs named in atc
  // --input_shape concatenated in that order, as aclmdlGetInputDynamicDims
  // lists them (aclmdlSetInputDynamicDims), or {H, W} (aclmdlSetDynamicHWSize).
  std::vector<std::vector<int64_t>> values;
  bool empty() const { return values.empty(); }
  // "dynamic dims gears [1,8], [1,16] (atc --dynamic_dims)" for messages.
  std::string Describe() const;
};

// Full dims of every input in each gear. Dims gears: `values` are the full
// dims of the inputs `listed` (model input indexes, in the gear list's order)
// concatenated; inputs not listed keep their (static) dims. Image size gears:
// {H, W}, which fill the two -1 dims of each input (`listed` unused).
ShapeGears MakeShapeGears(
    ShapeGearKind kind, const std::vector<std::vector<int64_t>>& model_input_dims,
    const std::vector<std::vector<int64_t>>& values, const std::vector<size_t>& listed);

// Which inputs a dims gear list names, in its order. CANN lists the inputs of
// atc --input_shape in that order (aclmdlGetInputDynamicDims), without their
// names (aclmdlIODims.name is reserved): the order is the one whose ranks add
// up to the list and whose fixed dims agree with every gear, and which takes
// every input with a -1. When several fit with different results, the model's
// input order is taken if it is one of them; otherwise, or when none fits,
// the error names the model's inputs in model order and the gear list.
TRITONSERVER_Error* BindDimsGearList(
    const std::vector<ModelTensorDesc>& inputs,
    const std::vector<std::vector<int64_t>>& values, std::vector<size_t>* listed);

// The dims a config may declare for model input dims `dims` (index `input`):
// a -1 the gears fill with one value everywhere becomes that value; a -1
// they vary stays -1.
std::vector<int64_t> DimsAcrossGears(
    const ShapeGears& gears, size_t input, const std::vector<int64_t>& dims);

// Index of the gear whose input dims are exactly `shapes` (ModelIoDesc.inputs
// order); false when none is.
bool MatchShapeGear(
    const ShapeGears& gears, const std::vector<std::vector<int64_t>>& shapes,
    size_t* gear);

struct ModelIoDesc {
  std::vector<ModelTensorDesc> inputs;  // without the dynamic-batch input
  std::vector<ModelTensorDesc> outputs;
  std::vector<int64_t> gears;  // dynamic batch gears, may be empty
  ShapeGears shape_gears;      // dims or image size gears, may be empty
  bool has_dynamic_batch_input = false;
  size_t dynamic_batch_input_index = 0;   // index among the model's inputs
  std::vector<size_t> input_model_index;  // model index of inputs[i]
  size_t dynamic_batch_input_size = 0;    // bytes of that extra input
};

// How config tensors map onto the model, and how batches are run.
struct IoBinding {
  std::vector<size_t> input_index;   // config input i -> ModelIoDesc.inputs
  std::vector<size_t> output_index;  // config output i -> ModelIoDesc.outputs
  std::vector<int64_t> gears;        // sorted; empty for a static model
  ShapeGears shape_gears;            // dims/image size gears; input_dims in config order
  size_t static_batch = 0;           // batch dim of a static model (0: none)
  size_t max_exec_rows = 1;          // largest rows one execution handles
  bool exact_rows = false;  // runs exactly the rows given (ge_graph dynamic batch)
  // Rows the model runs for 'rows' real rows (gear or static batch).
  bool ExecRows(size_t rows, size_t* exec_rows) const;
};

// Gives `io` its dims or image size gears, built from its inputs' dims, and
// writes into those dims what a config may declare (DimsAcrossGears).
TRITONSERVER_Error* ApplyShapeGears(
    ShapeGearKind kind, const std::vector<std::vector<int64_t>>& values, ModelIoDesc* io);

// Checks the config against the model description; 'model_label' names the
// model file in messages ("model.om").
TRITONSERVER_Error* BindConfigToModel(
    const ModelConfigSpec& spec, const ModelIoDesc& desc, const std::string& model_label,
    IoBinding* binding);

std::string DimsToString(const std::vector<int64_t>& dims);

}  // namespace npu_ge
