// The ACL offline-model engine: runs <version>/model.om files compiled by ATC.
#pragma once

#include <memory>

#include "acl_runtime.h"
#include "acl_utils.h"
#include "engine.h"

namespace npu_ge {

// Reads the inputs/outputs (and batch gears) an .om file declares.
TRITONSERVER_Error* ReadOmDescription(
    const AclRuntime& rt, aclmdlDesc* desc, ModelIoDesc* io);

class AclOmEngine : public Engine {
 public:
  // Reads the .om description and binds the configuration to it.
  static TRITONSERVER_Error* Create(
      std::shared_ptr<AclRuntime> runtime, const ModelConfigSpec& spec,
      const std::string& model_path, std::unique_ptr<Engine>* engine);

  const IoBinding& binding() const override { return binding_; }
  TRITONSERVER_Error* CreateInstance(
      int32_t device, std::unique_ptr<EngineInstance>* instance) override;

 private:
  AclOmEngine() = default;
  std::shared_ptr<AclRuntime> runtime_;
  ModelConfigSpec spec_;
  std::string model_path_;
  ModelIoDesc io_;
  IoBinding binding_;
};

}  // namespace npu_ge
