// Auto-complete: a model configuration that leaves out its inputs and/or
// outputs is completed from what the compiled model declares, as Triton's
// ONNX Runtime and TensorRT backends do. Triton asks for it unless the
// server runs with --disable-auto-complete-config; the completed JSON goes
// back through TRITONBACKEND_ModelSetConfig, so GET /v2/models/<m>/config
// shows it. Pure logic over JSON, unit-tested.
#pragma once

#include <string>

#include "json.h"
#include "model_config.h"

namespace npu_ge {

// True when the configuration declares no input or no output.
bool ConfigNeedsAutoComplete(const JsonValue& config);

// Returns `config` completed from `io`:
//  - max_batch_size 0 (not set) becomes the largest batch gear of a
//    dynamic-batch model; a set max_batch_size is kept;
//  - a missing input / output list is filled with every model tensor (name,
//    TYPE_*, dims without the batch dimension when max_batch_size > 0);
//    declared lists are kept as written (and checked against the model later).
// `summary` describes what was added, for the load log.
TRITONSERVER_Error* AutoCompleteConfig(
    const JsonValue& config, const ModelIoDesc& io, const std::string& model_label,
    JsonValue* completed, std::string* summary);

}  // namespace npu_ge
