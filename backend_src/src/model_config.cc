#include "model_config.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "batching.h"
#include "dtype.h"
#include "triton_utils.h"

namespace npu_ge {
namespace {

std::string
Trim(const std::string& s)
{
  size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\n");
  return s.substr(b, e - b + 1);
}

std::string
Lower(std::string s)
{
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) {
    return static_cast<char>(std::tolower(c));
  });
  return s;
}

TRITONSERVER_Error*
ParseEngine(const std::string& key, const std::string& value, EngineKind* kind)
{
  std::string v = Lower(Trim(value));
  if (v == "acl_om" || v == "om" || v == "acl" || v == "offline") {
    *kind = EngineKind::kAclOm;
  } else if (v == "ge_graph" || v == "ge" || v == "graph" || v == "online") {
    *kind = EngineKind::kGeGraph;
  } else {
    return NPU_GE_ERROR(
        INVALID_ARG, "parameter '" << key << "': expected 'acl_om' or 'ge_graph', got '"
                                   << value << "'");
  }
  return nullptr;
}

TRITONSERVER_Error*
ParseTensors(const JsonValue& list, const char* what, std::vector<TensorConfig>* out)
{
  std::set<std::string> seen;
  for (const JsonValue& item : list.Items()) {
    TensorConfig t;
    t.name = item["name"].AsString();
    if (t.name.empty()) {
      return NPU_GE_ERROR(INVALID_ARG, "every " << what << " needs a name");
    }
    if (!seen.insert(t.name).second) {
      return NPU_GE_ERROR(INVALID_ARG, what << " '" << t.name << "' is declared twice");
    }
    const std::string& dt = item["data_type"].AsString();
    if (!DataTypeFromConfig(dt, &t.dtype)) {
      return NPU_GE_ERROR(
          INVALID_ARG, what << " '" << t.name << "': unknown data_type '" << dt << "'");
    }
    for (const JsonValue& d : item["dims"].Items()) {
      int64_t v = 0;
      if (!d.AsInt64(&v)) {
        return NPU_GE_ERROR(
            INVALID_ARG, what << " '" << t.name << "': dims must be integers");
      }
      t.dims.push_back(v);
    }
    if (item["reshape"].IsObject() && item["reshape"]["shape"].Size() > 0) {
      return NPU_GE_ERROR(
          UNSUPPORTED,
          what << " '" << t.name << "': 'reshape' is not supported by npu_ge");
    }
    // The compiled model reads every input each execution: a request cannot leave one
    // out.
    if (item["optional"].IsBool() && item["optional"].AsBool()) {
      return NPU_GE_ERROR(
          UNSUPPORTED,
          what << " '" << t.name
               << "': 'optional' is not supported by npu_ge (the model reads "
                  "every input in each request)");
    }
    out->push_back(std::move(t));
  }
  return nullptr;
}

const std::string*
StringParameter(const JsonValue& params, const std::string& key)
{
  const JsonValue& p = params[key];
  if (!p.IsObject() || !p["string_value"].IsString()) return nullptr;
  return &p["string_value"].AsString();
}

TRITONSERVER_Error*
ParseHostPathParameters(const JsonValue& params, ModelConfigSpec* spec)
{
  if (const std::string* t = StringParameter(params, "execute_timeout_ms")) {
    std::string v = Trim(*t);
    bool digits =
        !v.empty() && v.size() < 10 &&
        std::all_of(
            v.begin(), v.end(), [](unsigned char ch) { return std::isdigit(ch) != 0; });
    int64_t ms = digits ? std::stoll(v) : 0;
    if (!digits || ms < 1 || ms > 3600000) {
      return NPU_GE_ERROR(
          INVALID_ARG,
          "parameter 'execute_timeout_ms': expected an integer in [1, 3600000], got '"
              << *t << "'");
    }
    spec->execute_timeout_ms = ms;
  }
  if (const std::string* o = StringParameter(params, "copy_overlap")) {
    std::string v = Lower(Trim(*o));
    if (v == "true" || v == "1" || v == "on") {
      spec->copy_overlap = true;
    } else if (v == "false" || v == "0" || v == "off") {
      spec->copy_overlap = false;
    } else {
      return NPU_GE_ERROR(
          INVALID_ARG,
          "parameter 'copy_overlap': expected 'true' or 'false', got '" << *o << "'");
    }
  }
  return nullptr;
}

// Settings the older Ascend GE backend read (as model parameters and in
// --backend-config) that npu_ge does not: what to do instead, or null.
const char*
LegacyAdvice(const std::string& key)
{
  static const std::map<std::string, const char*> kLegacy{
      {"device_exec_blocks", "set instance_group count (one stream per instance)"},
      {"instance_exec_blocks", "set instance_group count (one stream per instance)"},
      {"static_model", "npu_ge takes the batch shape from the model itself"},
      {"dump_graph", "use CANN's own dump settings (DUMP_GE_GRAPH) in the environment"},
      {"dump_data", "use CANN's own dump settings in the environment"},
      {"profiling", "use CANN's own profiling settings in the environment"}};
  auto it = kLegacy.find(key);
  return it == kLegacy.end() ? nullptr : it->second;
}

TRITONSERVER_Error*
ParseParameters(const JsonValue& params, ModelConfigSpec* spec)
{
  const char* ids_key = "device_ids";
  const std::string* ids = StringParameter(params, "device_ids");
  const std::string* legacy_ids = StringParameter(params, "DEVICE_ID");
  if (legacy_ids != nullptr) {
    spec->warnings.push_back(
        "parameter 'DEVICE_ID' is deprecated; use 'device_ids'" +
        std::string(ids != nullptr ? " (ignored: 'device_ids' is also set)" : ""));
    if (ids == nullptr) {
      ids = legacy_ids;
      ids_key = "DEVICE_ID";
    }
  }
  if (ids != nullptr) {
    NPU_GE_RETURN_IF_ERROR(WrapError(
        ParseDeviceIds(*ids, &spec->device_ids),
        std::string("parameter '") + ids_key + "'"));
  }
  spec->engine_key = "engine";
  const std::string* engine = StringParameter(params, "engine");
  const std::string* legacy_engine = StringParameter(params, "EXECUTOR_TYPE");
  if (legacy_engine != nullptr) {
    spec->warnings.push_back(
        "parameter 'EXECUTOR_TYPE' is deprecated; use 'engine'" +
        std::string(engine != nullptr ? " (ignored: 'engine' is also set)" : ""));
    if (engine == nullptr) {
      engine = legacy_engine;
      spec->engine_key = "EXECUTOR_TYPE";
    }
  }
  if (engine != nullptr) {
    NPU_GE_RETURN_IF_ERROR(ParseEngine(spec->engine_key, *engine, &spec->engine));
    spec->engine_set = true;
    spec->engine_value = *engine;
  }
  NPU_GE_RETURN_IF_ERROR(ParseHostPathParameters(params, spec));
  for (const auto& kv : params.Members()) {
    static const std::set<std::string> kKnown{
        "device_ids",    "DEVICE_ID",          "engine",
        "EXECUTOR_TYPE", "execute_timeout_ms", "copy_overlap"};
    if (kKnown.count(kv.first) != 0 || !kv.second["string_value"].IsString()) continue;
    if (const char* advice = LegacyAdvice(kv.first)) {
      spec->warnings.push_back(
          "parameter '" + kv.first +
          "' is a setting of the older Ascend GE backend that npu_ge does not read "
          "(ignored): " +
          advice);
      continue;
    }
    spec->options[kv.first] = kv.second["string_value"].AsString();
  }
  return nullptr;
}

bool
EndsWith(const std::string& s, const std::string& suffix)
{
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Keys Triton itself adds to every backend's cmdline configuration.
bool
IsTritonCmdlineKey(const std::string& key)
{
  static const std::set<std::string> kTriton{
      "auto-complete-config", "backend-directory", "default-max-batch-size",
      "min-compute-capability"};
  return kTriton.count(key) != 0;
}

// A GE global option from --backend-config (`key` as written); the same
// option given twice (ge.X and global.ge.X) must agree.
TRITONSERVER_Error*
AddGlobalGeOption(
    const std::string& written, const std::string& value, const std::string& option,
    BackendConfigSpec* spec)
{
  auto it = spec->ge_options.find(option);
  if (it != spec->ge_options.end() && it->second != value) {
    return NPU_GE_ERROR(
        INVALID_ARG, "--backend-config=npu_ge,"
                         << written << "=" << value << ": GE global "
                         << "option " << option << " is also set to '" << it->second
                         << "'; give it once");
  }
  spec->ge_options[option] = value;
  return nullptr;
}

// --backend-config keys in the public GE backend's scopes: global.<option>
// (GEInitialize), session.<option> and graph.<option> (every ge_graph model's
// session and graph). Not one of them: nothing done.
TRITONSERVER_Error*
ScopedGeOption(
    const std::string& key, const std::string& value, BackendConfigSpec* spec,
    bool have_ge_graph)
{
  std::string scope, option;
  for (const char* s : {"global", "session", "graph"}) {
    const std::string prefix = std::string(s) + ".";
    if (key.rfind(prefix, 0) == 0 && key.size() > prefix.size()) {
      scope = s;
      option = key.substr(prefix.size());
    }
  }
  if (scope.empty()) return nullptr;
  if (!have_ge_graph) {
    spec->warnings.push_back(
        "--backend-config=npu_ge," + key + "=" + value + ": GE " + scope +
        " options apply to engine 'ge_graph', which this build lacks (ignored; .om "
        "models take compile options from atc when converted)");
  }
  if (scope == "global") return AddGlobalGeOption(key, value, option, spec);
  (scope == "session" ? spec->ge_session_options : spec->ge_graph_options)[option] =
      value;
  return nullptr;
}

// The --backend-config keys besides device_ids / telemetry_interval_ms.
TRITONSERVER_Error*
ParseBackendOptions(const JsonValue& cmdline, BackendConfigSpec* spec, bool have_ge_graph)
{
  for (const auto& kv : cmdline.Members()) {
    const std::string& key = kv.first;
    if (key == "device_ids" || key == "telemetry_interval_ms" ||
        IsTritonCmdlineKey(key)) {
      continue;
    }
    const std::string value = kv.second.AsString();
    NPU_GE_RETURN_IF_ERROR(ScopedGeOption(key, value, spec, have_ge_graph));
    if (key.rfind("global.", 0) == 0 || key.rfind("session.", 0) == 0 ||
        key.rfind("graph.", 0) == 0) {
      continue;
    }
    if (key.rfind("ge.", 0) == 0 && key.size() > 3) {
      NPU_GE_RETURN_IF_ERROR(AddGlobalGeOption(key, value, key, spec));
      if (!have_ge_graph) {
        spec->warnings.push_back(
            "--backend-config=npu_ge," + key + "=" + value +
            ": GE options apply to engine 'ge_graph', which this build lacks "
            "(ignored; .om models take compile options from atc when converted)");
      }
      continue;
    }
    if (const char* advice = LegacyAdvice(key)) {
      spec->warnings.push_back(
          "--backend-config=npu_ge," + key + "=" + value +
          ": a setting of the older Ascend GE backend that npu_ge does not read "
          "(ignored): " +
          advice);
      continue;
    }
    return NPU_GE_ERROR(
        INVALID_ARG, "--backend-config=npu_ge," << key << "=" << value
                                                << ": unknown key; npu_ge reads "
                                                   "device_ids, telemetry_interval_ms, "
                                                   "ge.<option> or global.<option> (GE "
                                                   "global options), session.<option> "
                                                   "and graph.<option>");
  }
  return nullptr;
}

}  // namespace

const char*
EngineKindName(EngineKind kind)
{
  return kind == EngineKind::kAclOm ? "acl_om" : "ge_graph";
}

size_t
TensorConfig::RowBytes() const
{
  int64_t n = ElementCount(dims);
  return n < 0 ? 0 : static_cast<size_t>(n) * DataTypeByteSize(dtype);
}

std::string
DimsToString(const std::vector<int64_t>& dims)
{
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

TRITONSERVER_Error*
ParseDeviceIds(const std::string& text, std::vector<int32_t>* ids)
{
  std::vector<int32_t> parsed;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = Trim(text.substr(start, comma - start));
    bool digits = !item.empty() && item.size() < 10 &&
                  std::all_of(
                      item.begin(), item.end(),
                      [](unsigned char c) { return std::isdigit(c) != 0; });
    if (!digits) {
      return NPU_GE_ERROR(
          INVALID_ARG,
          "expected a comma-separated list of device ids like "
          "'0,1', got '"
              << text << "'");
    }
    parsed.push_back(static_cast<int32_t>(std::stol(item)));
    start = comma + 1;
  }
  *ids = std::move(parsed);
  return nullptr;
}

TRITONSERVER_Error*
CheckTensorsDeclared(const ModelConfigSpec& spec)
{
  for (const auto* list : {&spec.inputs, &spec.outputs}) {
    if (list->empty()) {
      return NPU_GE_ERROR(
          INVALID_ARG, "expected at least one "
                           << (list == &spec.inputs ? "input" : "output")
                           << " in the model configuration, got none");
    }
  }
  return nullptr;
}

TRITONSERVER_Error*
ParseModelConfig(const JsonValue& config, ModelConfigSpec* spec, bool require_io)
{
  if (!config.IsObject()) {
    return NPU_GE_ERROR(INVALID_ARG, "model configuration is not a JSON object");
  }
  spec->name = config["name"].AsString();
  int64_t mbs = 0;
  if (config.Has("max_batch_size") && !config["max_batch_size"].AsInt64(&mbs)) {
    return NPU_GE_ERROR(INVALID_ARG, "max_batch_size must be an integer");
  }
  if (mbs < 0) {
    return NPU_GE_ERROR(INVALID_ARG, "expected max_batch_size >= 0, got " << mbs);
  }
  spec->max_batch_size = mbs;
  NPU_GE_RETURN_IF_ERROR(ParseTensors(config["input"], "input", &spec->inputs));
  NPU_GE_RETURN_IF_ERROR(ParseTensors(config["output"], "output", &spec->outputs));
  NPU_GE_RETURN_IF_ERROR(ParseParameters(config["parameters"], spec));
  spec->model_filename = config["default_model_filename"].AsString();
  spec->model_filename_set = !spec->model_filename.empty();
  if (!spec->engine_set && spec->model_filename_set &&
      !EndsWith(spec->model_filename, ".om")) {
    spec->engine = EngineKind::kGeGraph;  // .onnx / .pb / .air
  }
  if (spec->model_filename.empty()) {
    spec->model_filename = spec->engine == EngineKind::kAclOm ? "model.om" : "model.onnx";
  }
  if (spec->model_filename.find('/') != std::string::npos ||
      spec->model_filename == "..") {
    return NPU_GE_ERROR(
        INVALID_ARG, "default_model_filename must be a file name, got '"
                         << spec->model_filename << "'");
  }
  return require_io ? CheckTensorsDeclared(*spec) : nullptr;
}

bool
HoldsModelFile(const std::vector<std::string>& files, const ModelConfigSpec& spec)
{
  for (const std::string& f : files) {
    if (f == spec.model_filename) return true;
    if (!spec.engine_set && !spec.model_filename_set &&
        (EndsWith(f, ".onnx") || f == "model.pb")) {
      return true;
    }
  }
  return false;
}

// A TensorFlow frozen graph: the public GE backend parses it with GE's
// TensorFlow parser; npu_ge's ge_graph engine parses ONNX only.
static TRITONSERVER_Error*
TensorFlowModelError(bool have_ge_graph)
{
  return NPU_GE_ERROR(
      UNSUPPORTED,
      "the version directory holds the TensorFlow model model.pb and no model.om or "
      "*.onnx; npu_ge serves .om models"
          << (have_ge_graph
                  ? " and ONNX models (engine ge_graph parses ONNX only)"
                  : " (and ONNX models in the image built with the CANN toolkit)")
          << ": convert it with ATC (atc --framework=3 --model=model.pb ...) to "
             "model.om, "
             "or export it to ONNX");
}

TRITONSERVER_Error*
ResolveModelFile(
    const std::vector<std::string>& files, bool have_ge_graph, ModelConfigSpec* spec,
    std::string* note)
{
  note->clear();
  auto holds = [&](const std::string& f) {
    return std::find(files.begin(), files.end(), f) != files.end();
  };
  if (!spec->engine_set && !spec->model_filename_set && !holds("model.om")) {
    // What a repository written for the older GE backend holds: it took the
    // first *.onnx file it found.
    std::vector<std::string> onnx;
    for (const std::string& f : files) {
      if (EndsWith(f, ".onnx")) onnx.push_back(f);
    }
    std::sort(onnx.begin(), onnx.end());
    if (holds("model.onnx")) onnx = {"model.onnx"};
    if (onnx.size() > 1) {
      std::string names;
      for (const std::string& f : onnx) names += (names.empty() ? "" : ", ") + f;
      return NPU_GE_ERROR(
          INVALID_ARG, "the version directory holds no model.om or model.onnx but "
                           << onnx.size() << " ONNX files (" << names
                           << "): set default_model_filename to the one to serve");
    }
    if (onnx.size() == 1) {
      spec->engine = EngineKind::kGeGraph;
      spec->model_filename = onnx[0];
      *note = "the version directory holds " + onnx[0] +
              " and no model.om, and neither 'engine' nor default_model_filename "
              "is set: using engine 'ge_graph'";
    }
    // The public GE backend falls back from ONNX to a TensorFlow model.pb.
    if (onnx.empty() && holds("model.pb")) return TensorFlowModelError(have_ge_graph);
  }
  if (spec->model_filename_set && EndsWith(spec->model_filename, ".pb")) {
    return TensorFlowModelError(have_ge_graph);
  }
  if (spec->engine != EngineKind::kGeGraph || have_ge_graph) return nullptr;
  static const char* kWhatToDo =
      "convert with ATC to model.om, or use the image built with the CANN toolkit";
  if (spec->engine_set) {
    return NPU_GE_ERROR(
        UNSUPPORTED, "parameter '" << spec->engine_key << "' is '" << spec->engine_value
                                   << "', which selects the ge_graph engine (for "
                                   << spec->model_filename << "); this build lacks it: "
                                   << kWhatToDo << " (then set '" << spec->engine_key
                                   << "' to 'acl_om' or remove it)");
  }
  return NPU_GE_ERROR(
      UNSUPPORTED, spec->model_filename
                       << " needs the ge_graph engine, which this build lacks: "
                       << kWhatToDo);
}

TRITONSERVER_Error*
ParseBackendConfig(const JsonValue& config, BackendConfigSpec* spec, bool have_ge_graph)
{
  const JsonValue& cmdline = config["cmdline"];
  if (cmdline["device_ids"].IsString()) {
    NPU_GE_RETURN_IF_ERROR(WrapError(
        ParseDeviceIds(cmdline["device_ids"].AsString(), &spec->default_device_ids),
        "--backend-config=npu_ge,device_ids"));
  }
  const JsonValue& interval = cmdline["telemetry_interval_ms"];
  if (!interval.IsNull()) {
    int64_t ms = 0;
    if (!interval.AsInt64(&ms) || ms < 10 || ms > 3600000) {
      return NPU_GE_ERROR(
          INVALID_ARG,
          "--backend-config=npu_ge,telemetry_interval_ms: expected "
          "an integer in [10, 3600000], got '"
              << interval.AsString() << "'");
    }
    spec->telemetry_interval_ms = ms;
  }
  return ParseBackendOptions(cmdline, spec, have_ge_graph);
}

}  // namespace npu_ge
