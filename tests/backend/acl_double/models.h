// TEST DOUBLE: what the double keeps about descriptions, datasets and loaded
// models, shared by acl_double.cc (their API) and execution.cc (running them).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "acl/acl.h"
#include "model_file.h"

struct aclmdlDesc {
  acl_double::ModelSpec spec;
  bool of_model = false;  // filled by aclmdlGetDesc: model_id is valid
  uint32_t model_id = 0;
};
struct aclmdlDataset {
  std::vector<aclDataBuffer*> buffers;
  uint64_t dynamic_batch = 0;
  int64_t shape_gear = -1;  // dims/image size gear set on it, -1: none
};
struct aclDataBuffer {
  void* data;
  size_t size;
};

namespace acl_double {

struct LoadedModel {
  // Shared, read-only: every queued execution holds it, none copies it.
  std::shared_ptr<const ModelSpec> spec;
  int32_t device;
  // Like CANN's, the dynamic info is the model's: the gear last set on any of
  // its datasets decides what aclmdlGetCurOutputDims reports (-1: none yet).
  int64_t last_shape_gear = -1;
};

extern std::map<uint32_t, LoadedModel> g_models;  // by model id (g_mu)
extern uint32_t g_next_model_id;                  // (g_mu)
extern uint64_t g_model_loads;                    // successful loads (g_mu)
extern std::set<aclmdlDesc*> g_descs;             // live descriptions (g_mu)
extern std::set<aclmdlDataset*> g_datasets;       // live datasets (g_mu)
extern std::set<aclDataBuffer*> g_data_buffers;   // live data buffers (g_mu)

// Tensors as the model reports them: user inputs, then the dynamic-shape input
// (ACL_DYNAMIC_TENSOR_NAME) of a model with gears of any kind.
struct IoView {
  const ModelSpec& spec;
  size_t NumInputs() const
  {
    return spec.inputs.size() + (spec.HasDynamicInput() ? 1 : 0);
  }
  bool IsDynamicInput(size_t i) const
  {
    return spec.HasDynamicInput() && i == spec.inputs.size();
  }
};

}  // namespace acl_double
