// The GE graph engine: ONNX (or TF) models compiled online by GE at load.
// Graphs are compiled for a static batch of max_batch_size rows (smaller
// batches are padded, padding never returned). Options from the model's
// parameters: "ge.*" are global GE options, "session.<k>" session options and
// "graph.<k>" graph options (the scopes of the older Ascend GE backend).
#pragma once

#include <memory>

#include "engine.h"
#include "ge_port.h"

namespace npu_ge {

struct GeOptionSets {
  GeOptions global;
  GeOptions session;  // without the device entries, added per instance
  GeOptions graph;
};

// Splits model parameters into GE option scopes; unknown keys are errors.
TRITONSERVER_Error* BuildGeOptions(const ModelConfigSpec& spec, GeOptionSets* sets);

// Creates the engine; 'port' is shared by every instance of the model.
TRITONSERVER_Error* CreateGeGraphEngine(
    std::shared_ptr<GePort> port, const ModelConfigSpec& spec,
    const std::string& model_path, std::unique_ptr<Engine>* engine);

}  // namespace npu_ge
