#include "ge_graph_engine.h"

#include "triton_utils.h"

namespace npu_ge {

TRITONSERVER_Error*
BuildGeOptions(const ModelConfigSpec& spec, GeOptionSets* sets)
{
  GeOptionSets s;
  s.global["ge.graphRunMode"] = "0";  // inference
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
  s.graph["ge.inputShape"] = shapes;
  *sets = std::move(s);
  return nullptr;
}

namespace {

class GeGraphInstance : public EngineInstance {
 public:
  GeGraphInstance(
      std::shared_ptr<GePort> port, const ModelConfigSpec& spec, const IoBinding& binding)
      : port_(std::move(port)), spec_(spec), binding_(binding)
  {
  }
  ~GeGraphInstance() override
  {
    if (open_) port_->CloseSession(session_);
  }
  TRITONSERVER_Error* Open(
      const std::string& path, const GeOptionSets& opts, int32_t device)
  {
    GeOptions session = opts.session;
    session["ge.exec.deviceId"] = std::to_string(device);
    session["ge.session_device_id"] = std::to_string(device);
    NPU_GE_RETURN_IF_ERROR(port_->OpenSession(path, session, opts.graph, &session_));
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
  size_t DeviceBytes() const override { return 0; }  // GE does not tell

  TRITONSERVER_Error* Run(size_t, uint64_t* start, uint64_t* end) override
  {
    // The graph is compiled for max_exec_rows: run all of them (padded).
    std::vector<const void*> ins(in_.size());
    std::vector<size_t> in_bytes(in_.size());
    for (size_t i = 0; i < in_.size(); ++i) {
      ins[binding_.input_index[i]] = in_[i].data();
      in_bytes[binding_.input_index[i]] = in_[i].size();
    }
    std::vector<void*> outs(out_.size());
    std::vector<size_t> out_bytes(out_.size());
    for (size_t i = 0; i < out_.size(); ++i) {
      outs[binding_.output_index[i]] = out_[i].data();
      out_bytes[binding_.output_index[i]] = out_[i].size();
    }
    *start = NowNs();
    NPU_GE_RETURN_IF_ERROR(port_->Run(session_, ins, in_bytes, outs, out_bytes));
    *end = NowNs();
    return nullptr;
  }

 private:
  std::shared_ptr<GePort> port_;
  const ModelConfigSpec& spec_;
  const IoBinding& binding_;
  uint64_t session_ = 0;
  bool open_ = false;
  std::vector<std::vector<uint8_t>> in_, out_;
};

class GeGraphEngine : public Engine {
 public:
  GeGraphEngine(std::shared_ptr<GePort> port, ModelConfigSpec spec, std::string path)
      : port_(std::move(port)), spec_(std::move(spec)), path_(std::move(path))
  {
  }
  TRITONSERVER_Error* Init()
  {
    NPU_GE_RETURN_IF_ERROR(BuildGeOptions(spec_, &options_));
    NPU_GE_RETURN_IF_ERROR(port_->Initialize(options_.global));
    ModelIoDesc io;
    NPU_GE_RETURN_IF_ERROR(port_->Describe(path_, &io));
    if (spec_.max_batch_size > 0) {  // compiled with a fixed batch of max_batch_size
      for (auto* list : {&io.inputs, &io.outputs}) {
        for (ModelTensorDesc& t : *list) {
          if (!t.dims.empty() && t.dims[0] < 0) t.dims[0] = spec_.max_batch_size;
        }
      }
    }
    return BindConfigToModel(spec_, io, spec_.model_filename, &binding_);
  }
  const IoBinding& binding() const override { return binding_; }
  TRITONSERVER_Error* CreateInstance(
      int32_t device, std::unique_ptr<EngineInstance>* instance) override
  {
    std::unique_ptr<GeGraphInstance> inst(new GeGraphInstance(port_, spec_, binding_));
    NPU_GE_RETURN_IF_ERROR(inst->Open(path_, options_, device));
    instance->reset(inst.release());
    return nullptr;
  }

 private:
  std::shared_ptr<GePort> port_;
  ModelConfigSpec spec_;
  std::string path_;
  GeOptionSets options_;
  IoBinding binding_;
};

}  // namespace

TRITONSERVER_Error*
CreateGeGraphEngine(
    std::shared_ptr<GePort> port, const ModelConfigSpec& spec,
    const std::string& model_path, std::unique_ptr<Engine>* engine)
{
  std::unique_ptr<GeGraphEngine> e(new GeGraphEngine(std::move(port), spec, model_path));
  NPU_GE_RETURN_IF_ERROR(e->Init());
  engine->reset(e.release());
  return nullptr;
}

}  // namespace npu_ge
