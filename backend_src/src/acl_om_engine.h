// The ACL offline-model engine: runs <version>/model.om files compiled by ATC.
#pragma once

#include <memory>
#include <mutex>

#include "acl_runtime.h"
#include "acl_utils.h"
#include "engine.h"

namespace npu_ge {

// Reads the inputs/outputs (and batch gears) an .om file declares.
TRITONSERVER_Error* ReadOmDescription(
    const AclRuntime& rt, aclmdlDesc* desc, ModelIoDesc* io);

// A model loaded to be described, with the device reference and context it
// was loaded in: the first instance on `device` adopts all three, so loading
// a model puts its weights on the device once per instance, never once more
// to describe it. What no instance adopts is unloaded with the engine.
struct PreloadedOm {
  int32_t device = -1;
  DeviceRef device_ref;
  ContextOwner ctx;
  LoadedModel model;
  PreloadedOm() = default;
  PreloadedOm(const PreloadedOm&) = delete;
  PreloadedOm& operator=(const PreloadedOm&) = delete;
  ~PreloadedOm();  // unloads the model in its context
};

// Loads the .om on `device` in a context of its own and reads its description
// with aclmdlGetDesc (CANN's documented path; aclmdlGetDescFromFile is not
// supported on Atlas products before CANN 8.5). The loaded model is handed
// back in `loaded` for the first instance.
TRITONSERVER_Error* DescribeOmModel(
    const AclRuntime* rt, int32_t device, const std::string& path, ModelIoDesc* io,
    std::unique_ptr<PreloadedOm>* loaded);

class AclOmEngine : public Engine {
 public:
  // Binds the configuration to the model's description `io` and keeps the
  // model DescribeOmModel loaded for the first instance on its device.
  static TRITONSERVER_Error* Create(
      std::shared_ptr<AclRuntime> runtime, const ModelConfigSpec& spec,
      const std::string& model_path, const ModelIoDesc& io,
      std::unique_ptr<PreloadedOm> loaded, std::unique_ptr<Engine>* engine);

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
  std::mutex loaded_mu_;
  std::unique_ptr<PreloadedOm> loaded_;  // until an instance adopts it
};

}  // namespace npu_ge
