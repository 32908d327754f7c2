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

// Loads the .om once on `device` in a context of its own, reads its
// description with aclmdlGetDesc (CANN's documented path) and unloads it.
TRITONSERVER_Error* DescribeOmModel(
    const AclRuntime* rt, int32_t device, const std::string& path, ModelIoDesc* io);

class AclOmEngine : public Engine {
 public:
  // Binds the configuration to the model's description `io` (from
  // DescribeOmModel).
  static TRITONSERVER_Error* Create(
      std::shared_ptr<AclRuntime> runtime, const ModelConfigSpec& spec,
      const std::string& model_path, const ModelIoDesc& io,
      std::unique_ptr<Engine>* engine);

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
