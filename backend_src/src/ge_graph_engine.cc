#include "ge_graph_engine.h"

#include <chrono>
#include <condition_variable>
#include <cstring>

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
    const ModelConfigSpec& spec, GeOptionSets* sets, const GeOptionSets& backend,
    bool dynamic_batch)
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
  // Every input gets max_batch_size rows (a fixed batch), or with a dynamic
  // batch the shape range 1~max_batch_size in its batch dimension.
  std::string shapes;
  for (const TensorConfig& t : spec.inputs) {
    std::string d = DimsToString(t.dims);
    d = d.substr(1, d.size() - 2);
    if (spec.max_batch_size > 0) {
      const std::string batch = dynamic_batch ? "1~" + std::to_string(spec.max_batch_size)
                                              : std::to_string(spec.max_batch_size);
      d = batch + (d.empty() ? "" : "," + d);
    }
    shapes += (shapes.empty() ? "" : ";") + t.name + ":" + d;
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
              << shapes << "' ("
              << (dynamic_batch ? "1~max_batch_size" : "max_batch_size")
              << " rows of each config input's dims) and sizes its "
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

// One run handed to GE. Its completion (any thread, any time) writes the
// outputs into the staging only while the instance still waits for it; once
// the instance gave up (timeout) the late outputs are dropped, so they never
// land in memory the instance uses again.
struct PendingRun {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;       // completed while awaited: outputs copied or error set
  bool abandoned = false;  // the instance stopped waiting (execute_timeout_ms)
  bool finished = false;   // GE called back, awaited or not
  TRITONSERVER_Error* error = nullptr;
  std::vector<uint8_t*> dest;              // staging of model output j
  std::vector<std::vector<int64_t>> want;  // expected dims of model output j
  std::vector<size_t> want_bytes;
  std::vector<std::string> names;
  ~PendingRun()
  {
    if (error != nullptr) TRITONSERVER_ErrorDelete(error);
  }
  TRITONSERVER_Error* CopyOut(const std::vector<GeRunOutput>& outs)
  {
    if (outs.size() != dest.size()) {
      return NPU_GE_ERROR(
          INTERNAL,
          "GE returned " << outs.size() << " outputs, expected " << dest.size());
    }
    for (size_t j = 0; j < outs.size(); ++j) {  // graph order: the ONNX outputs' order
      if (outs[j].bytes != want_bytes[j]) {
        return NPU_GE_ERROR(
            INTERNAL, "GE output " << j << " ('" << names[j] << "'): expected "
                                   << want_bytes[j] << " bytes (dims "
                                   << DimsToString(want[j]) << "), got " << outs[j].bytes
                                   << " (dims " << DimsToString(outs[j].dims) << ")");
      }
      if (want_bytes[j] > 0) std::memcpy(dest[j], outs[j].data, want_bytes[j]);
    }
    return nullptr;
  }
};

// GE kept alive for sessions whose run never returned (GEFinalize must not
// run under them). Reachable for ever, deliberately.
void
KeepGeForLeakedSession(std::shared_ptr<GeGlobal> ge)
{
  static std::mutex mu;
  static auto* kept = new std::vector<std::shared_ptr<GeGlobal>>();
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(ge));
}

class GeGraphInstance : public EngineInstance {
 public:
  GeGraphInstance(
      std::shared_ptr<GeGlobal> ge, const ModelConfigSpec& spec, const IoBinding& binding,
      const GeGraphIo& io, bool dynamic_batch)
      : ge_(std::move(ge)),
        port_(ge_->shared_port()),
        spec_(spec),
        binding_(binding),
        io_(io),
        dynamic_batch_(dynamic_batch)
  {
  }
  ~GeGraphInstance() override
  {
    if (open_) port_->CloseSession(session_);
    for (Parked& p : parked_) {
      bool finished = false;
      {
        std::lock_guard<std::mutex> lock(p.run->mu);
        finished = p.run->finished;
      }
      if (finished) {  // the abandoned run came back meanwhile: safe to close
        port_->CloseSession(p.session);
        continue;
      }
      NPU_GE_LOG(
          ERROR, "model '" << spec_.name << "': GE session " << p.session
                           << " still runs the graph abandoned after execute_timeout_ms="
                           << spec_.execute_timeout_ms
                           << " ms; left open (leaked, with GE kept initialized) rather "
                              "than closed under a running graph; restart the server "
                              "to release it");
      KeepGeForLeakedSession(ge_);
    }
  }
  TRITONSERVER_Error* Open(
      const std::string& path, const GeOptionSets& opts, const GeOptions& session_extra,
      int32_t device)
  {
    path_ = path;
    opts_ = &opts;
    session_extra_ = session_extra;
    device_ = device;
    NPU_GE_RETURN_IF_ERROR(OpenSession());
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
  bool NeedsRecovery() const override { return !open_; }
  // A new session (compiled again) in place of the one parked after a timeout.
  TRITONSERVER_Error* Recover() override { return OpenSession(); }

  TRITONSERVER_Error* Run(size_t exec_rows, uint64_t* start, uint64_t* end) override
  {
    if (!open_) {
      return NPU_GE_ERROR(UNAVAILABLE, "no GE session (its rebuild failed)");
    }
    // Config tensor i is model tensor binding_.*_index[i] (its ONNX name). A
    // fixed batch runs all max_exec_rows rows (padded); a dynamic one exactly
    // the rows of the requests.
    std::vector<GeRunInput> ins(in_.size());
    for (size_t i = 0; i < in_.size(); ++i) {
      const size_t m = binding_.input_index[i];
      ins[m] = {in_[i].data(), RunDims(io_.inputs[m].dims, exec_rows)};
    }
    std::shared_ptr<PendingRun> run = NewRun(exec_rows);
    *start = NowNs();
    NPU_GE_RETURN_IF_ERROR(port_->RunAsync(
        session_, ins,
        [run](TRITONSERVER_Error* error, const std::vector<GeRunOutput>& outs) {
          std::lock_guard<std::mutex> lock(run->mu);
          run->finished = true;
          if (run->abandoned) {  // nobody reads these outputs: drop them
            if (error != nullptr) TRITONSERVER_ErrorDelete(error);
            return;
          }
          run->error = error != nullptr ? error : run->CopyOut(outs);
          run->done = true;
          run->cv.notify_all();
        }));
    std::unique_lock<std::mutex> lock(run->mu);
    const bool done = run->cv.wait_for(
        lock, std::chrono::milliseconds(spec_.execute_timeout_ms),
        [&run] { return run->done; });
    *end = NowNs();
    if (!done) {
      run->abandoned = true;  // from now on the callback writes nothing
      lock.unlock();
      parked_.push_back({session_, run});
      open_ = false;
      return NPU_GE_ERROR(
          UNAVAILABLE,
          "the GE graph run did not finish within execute_timeout_ms="
              << spec_.execute_timeout_ms << " ms; it is abandoned (its late outputs are "
              << "discarded) and its GE session " << session_
              << " parked until the model unloads; the instance compiles a new session "
                 "before its next request");
    }
    TRITONSERVER_Error* error = run->error;
    run->error = nullptr;
    return error;
  }

 private:
  struct Parked {
    uint64_t session;
    std::shared_ptr<PendingRun> run;
  };
  // Where and how large each model output of a run of exec_rows rows lands.
  std::shared_ptr<PendingRun> NewRun(size_t exec_rows)
  {
    auto run = std::make_shared<PendingRun>();
    run->dest.resize(out_.size());
    run->want.resize(out_.size());
    run->want_bytes.resize(out_.size());
    run->names.resize(out_.size());
    for (size_t k = 0; k < out_.size(); ++k) {
      const size_t j = binding_.output_index[k];
      run->dest[j] = out_[k].data();
      run->want[j] = RunDims(io_.outputs[j].dims, exec_rows);
      const int64_t n = ElementCount(run->want[j]);
      run->want_bytes[j] =
          n < 0 ? 0 : static_cast<size_t>(n) * DataTypeByteSize(io_.outputs[j].dtype);
      run->names[j] = io_.outputs[j].name;
    }
    return run;
  }
  std::vector<int64_t> RunDims(std::vector<int64_t> dims, size_t exec_rows) const
  {
    if (dynamic_batch_ && !dims.empty() && dims[0] < 0) {
      dims[0] = static_cast<int64_t>(exec_rows);
    }
    return dims;
  }
  TRITONSERVER_Error* OpenSession()
  {
    GeOptions session = opts_->session;
    for (const auto& kv : session_extra_) session.insert(kv);
    session["ge.exec.deviceId"] = std::to_string(device_);
    session["ge.session_device_id"] = std::to_string(device_);
    NPU_GE_RETURN_IF_ERROR(port_->OpenSession(
        path_, session, opts_->graph, io_, device_, &session_, &device_bytes_));
    open_ = true;
    return nullptr;
  }

  std::shared_ptr<GeGlobal> ge_;
  std::shared_ptr<GePort> port_;
  const ModelConfigSpec& spec_;
  const IoBinding& binding_;
  const GeGraphIo& io_;
  const bool dynamic_batch_;
  std::string path_;
  const GeOptionSets* opts_ = nullptr;  // the engine's, which outlives instances
  GeOptions session_extra_;
  int32_t device_ = 0;
  uint64_t session_ = 0;
  size_t device_bytes_ = 0;
  bool open_ = false;
  std::vector<Parked> parked_;  // sessions of abandoned runs
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
    ModelIoDesc io;
    NPU_GE_RETURN_IF_ERROR(ReadOnnxIoFile(path_, spec_.model_filename, &io));
    // A symbolic batch in every input, and batching: run each batch with its
    // own rows (GE dynamic shape, the public backend's default with
    // static_model off) instead of padding to max_batch_size.
    dynamic_batch_ = spec_.max_batch_size > 0 && !io.inputs.empty();
    for (const ModelTensorDesc& t : io.inputs) {
      dynamic_batch_ = dynamic_batch_ && !t.dims.empty() && t.dims[0] < 0;
    }
    NPU_GE_RETURN_IF_ERROR(
        BuildGeOptions(spec_, &options_, ge_->backend_scoped(), dynamic_batch_));
    ModelIoDesc bound = io;  // bound as if compiled with max_batch_size rows
    if (spec_.max_batch_size > 0) {
      for (auto* list : {&bound.inputs, &bound.outputs}) {
        for (ModelTensorDesc& t : *list) {
          if (!t.dims.empty() && t.dims[0] < 0) t.dims[0] = spec_.max_batch_size;
        }
      }
    }
    for (ModelIoDesc* d : {&io, &bound}) {
      FixDimsFromConfig(spec_.inputs, spec_.max_batch_size > 0, &d->inputs);
      FixDimsFromConfig(spec_.outputs, spec_.max_batch_size > 0, &d->outputs);
    }
    NPU_GE_RETURN_IF_ERROR(
        BindConfigToModel(spec_, bound, spec_.model_filename, &binding_));
    binding_.exact_rows = dynamic_batch_;
    const ModelIoDesc& compiled = dynamic_batch_ ? io : bound;
    io_.inputs = CompiledSpecs(compiled.inputs);
    io_.outputs = CompiledSpecs(compiled.outputs);
    return ge_->Join(spec_.name, options_.global, &session_extra_);
  }
  const IoBinding& binding() const override { return binding_; }
  TRITONSERVER_Error* CreateInstance(
      int32_t device, std::unique_ptr<EngineInstance>* instance) override
  {
    std::unique_ptr<GeGraphInstance> inst(
        new GeGraphInstance(ge_, spec_, binding_, io_, dynamic_batch_));
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
  bool dynamic_batch_ = false;
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
