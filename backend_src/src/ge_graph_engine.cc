#include "ge_graph_engine.h"

#include "batching.h"
#include "dtype.h"
#include "onnx_info.h"
#include "triton_utils.h"

namespace npu_ge {

size_t
GeTensorSpec::ByteSize() const
{
  const int64_t n = ElementCount(dims);
  return n < 0 ? 0 : static_cast<size_t>(n) * DataTypeByteSize(dtype);
}

TRITONSERVER_Error*
BuildGeOptions(
    const ModelConfigSpec& spec, GeOptionSets* sets, const GeOptionSets& backend)
{
  GeOptionSets s;
  s.session = backend.session;  // the model's own session.* / graph.* win
  s.graph = backend.graph;
  for (const auto& kv : spec.options) {
    const std::string& key = kv.first;
    if (key.rfind("ge.", 0) == 0) {
      s.global[key] = kv.second;
    } else if (key.rfind("session.", 0) == 0 && key.size() > 8) {
      s.session[key.substr(8)] = kv.second;
    } else if (key.rfind("graph.", 0) == 0 && key.size() > 6) {
      s.graph[key.substr(6)] = kv.second;
    } else {
      return NPU_GE_ERROR(
          INVALID_ARG, "parameter '" << key << "': expected a 'ge.*', 'session.*' or "
                                     << "'graph.*' option for engine 'ge_graph'");
    }
  }
  // Compile for a fixed batch: every input gets max_batch_size rows.
  std::string shapes;
  for (const TensorConfig& t : spec.inputs) {
    std::vector<int64_t> dims = t.dims;
    if (spec.max_batch_size > 0) dims.insert(dims.begin(), spec.max_batch_size);
    std::string d = DimsToString(dims);
    shapes += (shapes.empty() ? "" : ";") + t.name + ":" + d.substr(1, d.size() - 2);
  }
  auto given = s.graph.find("ge.inputShape");
  if (given != s.graph.end()) {
    std::string compact;  // "x: 8, 4" and "x:8,4" say the same
    for (char c : given->second) {
      if (c != ' ') compact += c;
    }
    if (compact != shapes) {
      const bool own = spec.options.count("graph.ge.inputShape") != 0;
      return NPU_GE_ERROR(
          INVALID_ARG,
          (own ? "parameter 'graph.ge.inputShape'"
               : "--backend-config=npu_ge,graph.ge.inputShape")
              << " is '" << given->second << "', but npu_ge compiles the graph for '"
              << shapes
              << "' (max_batch_size rows of each config input's dims) and sizes its "
                 "buffers for it: remove the parameter, or change max_batch_size or the "
                 "input dims so that they give the shapes you want");
    }
  }
  s.graph["ge.inputShape"] = shapes;
  *sets = std::move(s);
  return nullptr;
}

GeGlobal::GeGlobal(
    std::shared_ptr<GePort> port, GeOptions backend_options, GeOptionSets backend_scoped)
    : port_(std::move(port)),
      backend_options_(std::move(backend_options)),
      backend_scoped_(std::move(backend_scoped))
{
}

GeGlobal::~GeGlobal()
{
  if (initialized_) port_->Finalize();
}

TRITONSERVER_Error*
GeGlobal::Join(
    const std::string& model, const GeOptions& wanted, GeOptions* session_extra)
{
  std::lock_guard<std::mutex> lock(mu_);
  session_extra->clear();
  if (!initialized_) {
    GeOptions merged = backend_options_;
    std::map<std::string, std::string> origin;
    for (const auto& kv : backend_options_) origin[kv.first] = "--backend-config";
    for (const auto& kv : wanted) {
      auto it = merged.find(kv.first);
      if (it != merged.end() && it->second != kv.second) {
        return NPU_GE_ERROR(
            INVALID_ARG, "parameter '" << kv.first << "' is '" << kv.second
                                       << "', but --backend-config=npu_ge," << kv.first
                                       << "=" << it->second
                                       << " sets it for the whole process: GE global "
                                          "options are process-wide; remove the "
                                          "parameter or use the same value");
      }
      merged[kv.first] = kv.second;
      if (origin.count(kv.first) == 0) origin[kv.first] = "model '" + model + "'";
    }
    if (merged.emplace("ge.graphRunMode", "0").second) {  // inference, unless told
      origin["ge.graphRunMode"] = "npu_ge's default (inference)";
    }
    NPU_GE_RETURN_IF_ERROR(port_->Initialize(merged));
    initialized_ = true;
    options_ = std::move(merged);
    origin_ = std::move(origin);
    return nullptr;
  }
  for (const auto& kv : wanted) {
    auto it = options_.find(kv.first);
    if (it == options_.end()) {
      (*session_extra)[kv.first] = kv.second;  // GE is up: this session only
    } else if (it->second != kv.second) {
      return NPU_GE_ERROR(
          INVALID_ARG, "parameter '" << kv.first << "' is '" << kv.second
                                     << "', but GE is already initialized in this "
                                        "process with "
                                     << kv.first << "='" << it->second << "' (from "
                                     << origin_[kv.first]
                                     << "): GE global options are process-wide; use '"
                                     << it->second
                                     << "', or set it once for every model with "
                                        "--backend-config=npu_ge,"
                                     << kv.first << "=<value> and restart the server");
    }
  }
  return nullptr;
}

namespace {

class GeGraphInstance : public EngineInstance {
 public:
  GeGraphInstance(
      std::shared_ptr<GePort> port, const ModelConfigSpec& spec, const IoBinding& binding,
      const GeGraphIo& io)
      : port_(std::move(port)), spec_(spec), binding_(binding), io_(io)
  {
  }
  ~GeGraphInstance() override
  {
    if (open_) port_->CloseSession(session_);
  }
  TRITONSERVER_Error* Open(
      const std::string& path, const GeOptionSets& opts, const GeOptions& session_extra,
      int32_t device)
  {
    GeOptions session = opts.session;
    for (const auto& kv : session_extra) session.insert(kv);
    session["ge.exec.deviceId"] = std::to_string(device);
    session["ge.session_device_id"] = std::to_string(device);
    NPU_GE_RETURN_IF_ERROR(port_->OpenSession(
        path, session, opts.graph, io_, device, &session_, &device_bytes_));
    open_ = true;
    for (const TensorConfig& t : spec_.inputs) {
      in_.emplace_back(t.RowBytes() * binding_.max_exec_rows, 0);
    }
    for (const TensorConfig& t : spec_.outputs) {
      out_.emplace_back(t.RowBytes() * binding_.max_exec_rows, 0);
    }
    return nullptr;
  }
  uint8_t* InputStaging(size_t i) override { return in_[i].data(); }
  const uint8_t* OutputStaging(size_t i) const override { return out_[i].data(); }
  size_t DeviceBytes() const override { return device_bytes_; }

  TRITONSERVER_Error* Run(size_t, uint64_t* start, uint64_t* end) override
  {
    // The graph is compiled for max_exec_rows: run all of them (padded).
    // Config tensor i is model tensor binding_.*_index[i] (its ONNX name).
    std::vector<const void*> ins(in_.size());
    for (size_t i = 0; i < in_.size(); ++i) ins[binding_.input_index[i]] = in_[i].data();
    std::vector<void*> outs(out_.size());
    for (size_t i = 0; i < out_.size(); ++i) {
      outs[binding_.output_index[i]] = out_[i].data();
    }
    *start = NowNs();
    NPU_GE_RETURN_IF_ERROR(port_->Run(session_, ins, outs));
    *end = NowNs();
    return nullptr;
  }

 private:
  std::shared_ptr<GePort> port_;
  const ModelConfigSpec& spec_;
  const IoBinding& binding_;
  const GeGraphIo& io_;
  uint64_t session_ = 0;
  size_t device_bytes_ = 0;
  bool open_ = false;
  std::vector<std::vector<uint8_t>> in_, out_;
};

// GE compiles the graph for the shapes npu_ge gives it (ge.inputShape), so a
// symbolic ONNX dim the config gives a value is compiled with that value:
// ONNX x [bs, seq] with max_batch_size 0 and config [1, 128], or with
// max_batch_size 8 and config [128] (the batch is set apart). Dims the config
// leaves -1 stay -1 and the binding refuses them.
void
FixDimsFromConfig(
    const std::vector<TensorConfig>& cfgs, bool batched,
    std::vector<ModelTensorDesc>* list)
{
  for (ModelTensorDesc& t : *list) {
    for (const TensorConfig& cfg : cfgs) {
      if (cfg.name != t.name) continue;
      const size_t skip = batched ? 1 : 0;  // the batch dim is not in the config
      if (t.dims.size() != cfg.dims.size() + skip) continue;  // the binding says why
      for (size_t d = 0; d < cfg.dims.size(); ++d) {
        if (t.dims[d + skip] < 0 && cfg.dims[d] >= 0) t.dims[d + skip] = cfg.dims[d];
      }
    }
  }
}

// The compiled shapes: ONNX dims with a dynamic batch set to the rows the
// graph is compiled for.
std::vector<GeTensorSpec>
CompiledSpecs(const std::vector<ModelTensorDesc>& tensors)
{
  std::vector<GeTensorSpec> specs;
  for (const ModelTensorDesc& t : tensors) specs.push_back({t.name, t.dtype, t.dims});
  return specs;
}

class GeGraphEngine : public Engine {
 public:
  GeGraphEngine(std::shared_ptr<GeGlobal> ge, ModelConfigSpec spec, std::string path)
      : ge_(std::move(ge)), spec_(std::move(spec)), path_(std::move(path))
  {
  }
  TRITONSERVER_Error* Init()
  {
    NPU_GE_RETURN_IF_ERROR(BuildGeOptions(spec_, &options_, ge_->backend_scoped()));
    ModelIoDesc io;
    NPU_GE_RETURN_IF_ERROR(ReadOnnxIoFile(path_, spec_.model_filename, &io));
    if (spec_.max_batch_size > 0) {  // compiled with a fixed batch of max_batch_size
      for (auto* list : {&io.inputs, &io.outputs}) {
        for (ModelTensorDesc& t : *list) {
          if (!t.dims.empty() && t.dims[0] < 0) t.dims[0] = spec_.max_batch_size;
        }
      }
    }
    FixDimsFromConfig(spec_.inputs, spec_.max_batch_size > 0, &io.inputs);
    FixDimsFromConfig(spec_.outputs, spec_.max_batch_size > 0, &io.outputs);
    NPU_GE_RETURN_IF_ERROR(BindConfigToModel(spec_, io, spec_.model_filename, &binding_));
    io_.inputs = CompiledSpecs(io.inputs);
    io_.outputs = CompiledSpecs(io.outputs);
    return ge_->Join(spec_.name, options_.global, &session_extra_);
  }
  const IoBinding& binding() const override { return binding_; }
  TRITONSERVER_Error* CreateInstance(
      int32_t device, std::unique_ptr<EngineInstance>* instance) override
  {
    std::unique_ptr<GeGraphInstance> inst(
        new GeGraphInstance(ge_->shared_port(), spec_, binding_, io_));
    NPU_GE_RETURN_IF_ERROR(inst->Open(path_, options_, session_extra_, device));
    instance->reset(inst.release());
    return nullptr;
  }

 private:
  std::shared_ptr<GeGlobal> ge_;
  ModelConfigSpec spec_;
  std::string path_;
  GeOptionSets options_;
  GeOptions session_extra_;  // ge.* keys GE was initialized without
  IoBinding binding_;
  GeGraphIo io_;
};

}  // namespace

TRITONSERVER_Error*
CreateGeGraphEngine(
    std::shared_ptr<GeGlobal> ge, const ModelConfigSpec& spec,
    const std::string& model_path, std::unique_ptr<Engine>* engine)
{
  std::unique_ptr<GeGraphEngine> e(new GeGraphEngine(std::move(ge), spec, model_path));
  NPU_GE_RETURN_IF_ERROR(e->Init());
  engine->reset(e.release());
  return nullptr;
}

}  // namespace npu_ge
