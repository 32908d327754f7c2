#include "model_state.h"

#include <dirent.h>
#include <sys/stat.h>

#include "acl_om_engine.h"
#include "auto_complete.h"
#include "onnx_info.h"
#ifdef NPU_GE_WITH_GE_GRAPH
#include "ge_graph_engine.h"
#endif
#include "triton_utils.h"

namespace npu_ge {
namespace {

#ifdef NPU_GE_WITH_GE_GRAPH
constexpr bool kHaveGeGraph = true;
#else
constexpr bool kHaveGeGraph = false;
#endif

bool
IsRegularFile(const std::string& path)
{
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Names of the regular files in 'dir' (empty if it cannot be read).
std::vector<std::string>
RegularFiles(const std::string& dir)
{
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = readdir(d)) {
    if (IsRegularFile(dir + e->d_name)) names.push_back(e->d_name);
  }
  closedir(d);
  return names;
}

}  // namespace

TRITONSERVER_Error*
ModelState::Create(TRITONBACKEND_Model* model, std::unique_ptr<ModelState>* state)
{
  std::unique_ptr<ModelState> s(new ModelState());
  const char* name = nullptr;
  NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelName(model, &name));
  s->name_ = name;
  NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelVersion(model, &s->version_));
  TRITONBACKEND_Backend* backend = nullptr;
  NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelBackend(model, &backend));
  void* backend_state = nullptr;
  NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_BackendState(backend, &backend_state));
  s->backend_ = static_cast<BackendState*>(backend_state);

  TRITONSERVER_Message* raw = nullptr;
  NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelConfig(model, 1, &raw));
  MessagePtr message(raw);  // owned by us (TRITONBACKEND_ModelConfig contract)
  JsonValue config;
  NPU_GE_RETURN_IF_ERROR(ParseMessage(raw, "model config", &config));
  bool auto_complete = false;
  NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelAutoCompleteConfig(model, &auto_complete));
  NPU_GE_RETURN_IF_ERROR(ParseModelConfig(config, &s->spec_, /*require_io=*/false));
  TRITONBACKEND_ArtifactType artifact;
  const char* location = nullptr;
  NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelRepository(model, &artifact, &location));
  const std::string model_dir = std::string(location) + "/";
  std::string version_dir = model_dir + std::to_string(s->version_) + "/";
  std::vector<std::string> files = RegularFiles(version_dir);
  if (!HoldsModelFile(files, s->spec_)) {
    // The public GE backend searches the whole model directory for its file;
    // npu_ge looks one level up, beside config.pbtxt, and says so.
    std::vector<std::string> outer = RegularFiles(model_dir);
    if (HoldsModelFile(outer, s->spec_)) {
      NPU_GE_LOG(
          WARN, "model '" << s->name_ << "': the version directory " << version_dir
                          << " holds no model file; using the model directory "
                          << model_dir << " (as the public GE backend does)");
      version_dir = model_dir;
      files = std::move(outer);
    }
  }
  std::string note;
  NPU_GE_RETURN_IF_ERROR(WrapError(
      ResolveModelFile(files, kHaveGeGraph, &s->spec_, &note),
      "model '" + s->name_ + "' version " + std::to_string(s->version_)));
  if (!note.empty()) NPU_GE_LOG(INFO, "model '" << s->name_ << "': " << note);
  const bool complete = auto_complete && ConfigNeedsAutoComplete(config);
  if (!complete) NPU_GE_RETURN_IF_ERROR(CheckTensorsDeclared(s->spec_));
  if (s->spec_.engine == EngineKind::kAclOm) {
    for (const auto& kv : s->spec_.options) {
      s->spec_.warnings.push_back(
          "parameter '" + kv.first + "' is not used by engine 'acl_om' (ignored)");
    }
  }
  for (const std::string& w : s->spec_.warnings) {
    NPU_GE_LOG(WARN, "model '" << s->name_ << "': " << w);
  }
  s->device_ids_ = s->spec_.device_ids.empty() ? s->backend_->config().default_device_ids
                                               : s->spec_.device_ids;

  const std::string path = version_dir + s->spec_.model_filename;
  if (!IsRegularFile(path)) {
    return NPU_GE_ERROR(
        NOT_FOUND, "model file '" << path << "' not found (default_model_filename "
                                  << "is '" << s->spec_.model_filename << "')");
  }
  if (complete) NPU_GE_RETURN_IF_ERROR(s->AutoComplete(model, config, path));
  NPU_GE_RETURN_IF_ERROR(s->CreateEngine(path));
  NPU_GE_LOG(
      INFO, "model '" << s->name_ << "' version " << s->version_ << ": engine "
                      << EngineKindName(s->spec_.engine) << ", file " << path
                      << ", max_batch_size " << s->spec_.max_batch_size
                      << ", largest execution " << s->engine_->binding().max_exec_rows
                      << " row(s)");
  *state = std::move(s);
  return nullptr;
}

TRITONSERVER_Error*
ModelState::Describe(const AclRuntime& runtime, const std::string& path)
{
  const int32_t device = device_ids_.front();
  NPU_GE_RETURN_IF_ERROR(WrapError(
      DescribeOmModel(&runtime, device, path, &io_, &loaded_),
      "model '" + name_ + "' version " + std::to_string(version_) + " device " +
          std::to_string(device)));
  described_ = true;
  return nullptr;
}

TRITONSERVER_Error*
ModelState::AutoComplete(
    TRITONBACKEND_Model* model, const JsonValue& config, const std::string& path)
{
  ModelIoDesc onnx;  // ge_graph: the ONNX graph's own inputs and outputs
  if (spec_.engine == EngineKind::kAclOm) {
    std::shared_ptr<AclRuntime> runtime;
    NPU_GE_RETURN_IF_ERROR(backend_->Runtime(&runtime));
    NPU_GE_RETURN_IF_ERROR(Describe(*runtime, path));
  } else {
    NPU_GE_RETURN_IF_ERROR(ReadOnnxIoFile(path, spec_.model_filename, &onnx));
  }
  JsonValue completed;
  std::string summary;
  NPU_GE_RETURN_IF_ERROR(AutoCompleteConfig(
      config, spec_.engine == EngineKind::kAclOm ? io_ : onnx, spec_.model_filename,
      &completed, &summary));
  ModelConfigSpec full;
  NPU_GE_RETURN_IF_ERROR(
      WrapError(ParseModelConfig(completed, &full), "auto-completed configuration"));
  const std::string json = completed.Serialize();
  TRITONSERVER_Message* raw = nullptr;
  NPU_GE_RETURN_IF_ERROR(
      TRITONSERVER_MessageNewFromSerializedJson(&raw, json.data(), json.size()));
  MessagePtr message(raw);
  NPU_GE_RETURN_IF_ERROR(TRITONBACKEND_ModelSetConfig(model, 1, raw));
  spec_.max_batch_size = full.max_batch_size;
  spec_.inputs = std::move(full.inputs);
  spec_.outputs = std::move(full.outputs);
  NPU_GE_LOG(
      INFO, "model '" << name_ << "': configuration auto-completed from "
                      << spec_.model_filename << ": " << summary);
  return nullptr;
}

TRITONSERVER_Error*
ModelState::CreateEngine(const std::string& path)
{
  std::shared_ptr<AclRuntime> runtime;
  if (spec_.engine == EngineKind::kAclOm) {
    NPU_GE_RETURN_IF_ERROR(backend_->Runtime(&runtime));
    if (!described_) NPU_GE_RETURN_IF_ERROR(Describe(*runtime, path));
    return AclOmEngine::Create(runtime, spec_, path, io_, std::move(loaded_), &engine_);
  }
#ifdef NPU_GE_WITH_GE_GRAPH
  // GE is process-wide: one GeGlobal for every ge_graph model, initialized
  // with --backend-config's ge.* options (fixed for the process), held by the
  // backend so GEFinalize runs before aclFinalize.
  return CreateGeGraphEngine(backend_->Ge(&NewCannGePort), spec_, path, &engine_);
#else
  return NPU_GE_ERROR(
      UNSUPPORTED, "engine 'ge_graph' (" << spec_.model_filename
                                         << ") needs npu_ge built with the CANN "
                                            "toolkit (ASCEND_TOOLKIT_HOME set at build "
                                            "time); this build runs .om models only "
                                            "(engine 'acl_om')");
#endif
}

int32_t
ModelState::NextDevice()
{
  const uint32_t i = next_instance_.fetch_add(1);
  return device_ids_[i % device_ids_.size()];
}

}  // namespace npu_ge
