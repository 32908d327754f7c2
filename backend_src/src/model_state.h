// ModelState: the validated facts about one model (its configuration bound to
// the compiled model) and the engine that runs it. Created in
// TRITONBACKEND_ModelInitialize; instances read it, never modify it.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "acl_om_engine.h"
#include "backend_state.h"
#include "engine.h"
#include "model_config.h"

namespace npu_ge {

class ModelState {
 public:
  static TRITONSERVER_Error* Create(
      TRITONBACKEND_Model* model, std::unique_ptr<ModelState>* state);

  const std::string& name() const { return name_; }
  uint64_t version() const { return version_; }
  const ModelConfigSpec& spec() const { return spec_; }
  Engine& engine() { return *engine_; }
  BackendState& backend() { return *backend_; }
  const std::vector<int32_t>& device_ids() const { return device_ids_; }

  // Device of the next instance: device_ids[i % n] for the i-th instance.
  int32_t NextDevice();

 private:
  ModelState() = default;
  // Reads the .om description into io_ on the first device (DescribeOmModel),
  // keeping the loaded model for the engine's first instance there.
  TRITONSERVER_Error* Describe(const AclRuntime& runtime, const std::string& model_path);
  // Completes a config without inputs/outputs from the .om description (or,
  // for ge_graph, the ONNX graph's inputs/outputs) and hands it to Triton
  // (TRITONBACKEND_ModelSetConfig).
  TRITONSERVER_Error* AutoComplete(
      TRITONBACKEND_Model* model, const JsonValue& config, const std::string& model_path);
  TRITONSERVER_Error* CreateEngine(const std::string& model_path);

  BackendState* backend_ = nullptr;
  std::string name_;
  uint64_t version_ = 0;
  ModelConfigSpec spec_;
  std::vector<int32_t> device_ids_;
  ModelIoDesc io_;                       // the .om description (engine acl_om)
  bool described_ = false;               // io_ read already (by AutoComplete)
  std::unique_ptr<PreloadedOm> loaded_;  // from Describe, until CreateEngine
  std::unique_ptr<Engine> engine_;
  std::atomic<uint32_t> next_instance_{0};
};

}  // namespace npu_ge
