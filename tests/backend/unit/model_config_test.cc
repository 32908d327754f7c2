#include "model_config.h"
#include "test_util.h"

using namespace npu_ge;
using npu_ge_test::Json;
using npu_ge_test::Message;

namespace {

// Shaped like the JSON Triton 2.51 hands to TRITONBACKEND_ModelConfig.
const char* kConfig = R"({
  "name": "resnet", "platform": "", "backend": "npu_ge", "max_batch_size": 8,
  "input": [{"name": "x", "data_type": "TYPE_FP16", "format": "FORMAT_NONE",
             "dims": ["3", "224", "224"], "is_shape_tensor": false}],
  "output": [{"name": "prob", "data_type": "TYPE_FP32", "dims": [1000]},
             {"name": "idx", "data_type": "TYPE_INT64", "dims": [1]}],
  "instance_group": [{"name": "resnet_0", "kind": "KIND_CPU", "count": 2}],
  "default_model_filename": "",
  "parameters": {"device_ids": {"string_value": "2, 3"},
                 "ge.exec.precision_mode": {"string_value": "allow_fp32_to_fp16"}}
})";

}  // namespace

TEST(ModelConfig, ReadsTensorsBatchDevicesAndOptions)
{
  ModelConfigSpec spec;
  ASSERT_EQ(Message(ParseModelConfig(Json(kConfig), &spec)), "");
  EXPECT_EQ(spec.name, "resnet");
  EXPECT_EQ(spec.max_batch_size, 8);
  ASSERT_EQ(spec.inputs.size(), 1u);
  EXPECT_EQ(spec.inputs[0].dtype, TRITONSERVER_TYPE_FP16);
  EXPECT_EQ(spec.inputs[0].dims, (std::vector<int64_t>{3, 224, 224}));
  EXPECT_EQ(spec.inputs[0].RowBytes(), 3u * 224 * 224 * 2);
  ASSERT_EQ(spec.outputs.size(), 2u);
  EXPECT_EQ(spec.outputs[1].name, "idx");
  EXPECT_EQ(spec.device_ids, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(spec.engine, EngineKind::kAclOm);
  EXPECT_EQ(spec.model_filename, "model.om");
  EXPECT_EQ(spec.options.at("ge.exec.precision_mode"), "allow_fp32_to_fp16");
  EXPECT_TRUE(spec.warnings.empty());
}

TEST(ModelConfig, SeedKeysAreAliasesWithWarnings)
{
  ModelConfigSpec spec;
  ASSERT_EQ(
      Message(ParseModelConfig(
          Json(R"({
    "name": "m", "max_batch_size": 0,
    "input": [{"name": "a", "data_type": "TYPE_INT32", "dims": [2]}],
    "output": [{"name": "b", "data_type": "TYPE_INT32", "dims": [2]}],
    "parameters": {"DEVICE_ID": {"string_value": "1"},
                   "EXECUTOR_TYPE": {"string_value": "GE"}}})"),
          &spec)),
      "");
  EXPECT_EQ(spec.device_ids, (std::vector<int32_t>{1}));
  EXPECT_EQ(spec.engine, EngineKind::kGeGraph);
  EXPECT_EQ(spec.model_filename, "model.onnx");
  ASSERT_EQ(spec.warnings.size(), 2u);
  EXPECT_NE(
      spec.warnings[0].find("'DEVICE_ID' is deprecated; use 'device_ids'"),
      std::string::npos);
  EXPECT_NE(
      spec.warnings[1].find("'EXECUTOR_TYPE' is deprecated; use 'engine'"),
      std::string::npos);
}

TEST(ModelConfig, NewKeysWinOverSeedKeys)
{
  ModelConfigSpec spec;
  ASSERT_EQ(
      Message(ParseModelConfig(
          Json(R"({"name": "m",
    "input": [{"name": "a", "data_type": "TYPE_INT32", "dims": [2]}],
    "output": [{"name": "b", "data_type": "TYPE_INT32", "dims": [2]}],
    "parameters": {"DEVICE_ID": {"string_value": "1"},
                   "device_ids": {"string_value": "0,1"}}})"),
          &spec)),
      "");
  EXPECT_EQ(spec.device_ids, (std::vector<int32_t>{0, 1}));
  ASSERT_EQ(spec.warnings.size(), 1u);
  EXPECT_NE(spec.warnings[0].find("ignored"), std::string::npos);
}

TEST(ModelConfig, EngineFollowsTheModelFileName)
{
  ModelConfigSpec spec;
  ASSERT_EQ(
      Message(ParseModelConfig(
          Json(R"({"name": "m",
    "default_model_filename": "net.onnx",
    "input": [{"name": "a", "data_type": "TYPE_FP32", "dims": [2]}],
    "output": [{"name": "b", "data_type": "TYPE_FP32", "dims": [2]}]})"),
          &spec)),
      "");
  EXPECT_EQ(spec.engine, EngineKind::kGeGraph);
  EXPECT_EQ(spec.model_filename, "net.onnx");
}

TEST(ModelConfig, RejectsInvalidConfigsWithSpecificMessages)
{
  struct Case {
    const char* json;
    const char* message;
  };
  const Case cases[] = {
      {R"({"max_batch_size": -1, "input": [], "output": []})",
       "expected max_batch_size >= 0, got -1"},
      {R"({"input": [], "output": []})",
       "expected at least one input in the model configuration, got none"},
      {R"({"input": [{"name": "a", "data_type": "TYPE_FP8", "dims": [1]}],
           "output": []})",
       "input 'a': unknown data_type 'TYPE_FP8'"},
      {R"({"input": [{"name": "a", "data_type": "TYPE_FP32", "dims": [1]},
                     {"name": "a", "data_type": "TYPE_FP32", "dims": [1]}],
           "output": []})",
       "input 'a' is declared twice"},
      {R"({"input": [{"name": "a", "data_type": "TYPE_FP32", "dims": [1]}],
           "output": [{"name": "b", "data_type": "TYPE_FP32", "dims": [1]}],
           "parameters": {"device_ids": {"string_value": "0,x"}}})",
       "parameter 'device_ids': expected a comma-separated list of device ids like "
       "'0,1', got '0,x'"},
      {R"({"input": [{"name": "a", "data_type": "TYPE_FP32", "dims": [1]}],
           "output": [{"name": "b", "data_type": "TYPE_FP32", "dims": [1]}],
           "parameters": {"engine": {"string_value": "tensorrt"}}})",
       "parameter 'engine': expected 'acl_om' or 'ge_graph', got 'tensorrt'"},
      {R"({"input": [{"name": "a", "data_type": "TYPE_FP32", "dims": [1]}],
           "output": [{"name": "b", "data_type": "TYPE_FP32", "dims": [1]}],
           "default_model_filename": "../../etc/passwd"})",
       "default_model_filename must be a file name, got '../../etc/passwd'"},
      {R"({"input": [{"name": "a", "data_type": "TYPE_FP32", "dims": [1]}],
           "output": [{"name": "b", "data_type": "TYPE_FP32", "dims": [1]}],
           "parameters": {"execute_timeout_ms": {"string_value": "0"}}})",
       "parameter 'execute_timeout_ms': expected an integer in [1, 3600000], got '0'"},
      {R"({"input": [{"name": "a", "data_type": "TYPE_FP32", "dims": [1]}],
           "output": [{"name": "b", "data_type": "TYPE_FP32", "dims": [1]}],
           "parameters": {"copy_overlap": {"string_value": "maybe"}}})",
       "parameter 'copy_overlap': expected 'true' or 'false', got 'maybe'"},
  };
  for (const Case& c : cases) {
    ModelConfigSpec spec;
    EXPECT_EQ(Message(ParseModelConfig(Json(c.json), &spec)), c.message) << c.json;
  }
}

TEST(ModelConfig, ReadsHostPathParameters)
{
  ModelConfigSpec spec;
  EXPECT_EQ(spec.execute_timeout_ms, 60000);
  EXPECT_TRUE(spec.copy_overlap);
  ASSERT_EQ(
      Message(ParseModelConfig(
          Json(R"({"input": [{"name": "a", "data_type": "TYPE_FP32", "dims": [1]}],
                   "output": [{"name": "b", "data_type": "TYPE_FP32", "dims": [1]}],
                   "parameters": {"execute_timeout_ms": {"string_value": " 250 "},
                                  "copy_overlap": {"string_value": "off"}}})"),
          &spec)),
      "");
  EXPECT_EQ(spec.execute_timeout_ms, 250);
  EXPECT_FALSE(spec.copy_overlap);
  EXPECT_EQ(spec.options.count("execute_timeout_ms"), 0u);  // not a GE option
}

TEST(DeviceIds, ParsesListsAndRejectsGarbage)
{
  std::vector<int32_t> ids;
  ASSERT_EQ(Message(ParseDeviceIds(" 0, 1,7 ", &ids)), "");
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1, 7}));
  for (const char* bad : {"", ",", "0,,1", "-1", "1.5", "99999999999"}) {
    EXPECT_NE(Message(ParseDeviceIds(bad, &ids)), "") << bad;
  }
}

TEST(BackendConfig, ReadsCmdlineDefaults)
{
  BackendConfigSpec spec;
  ASSERT_EQ(
      Message(ParseBackendConfig(
          Json(R"({"cmdline": {
    "backend-directory": "/b", "device_ids": "4,5", "telemetry_interval_ms": "250"}})"),
          &spec)),
      "");
  EXPECT_EQ(spec.default_device_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(spec.telemetry_interval_ms, 250);

  BackendConfigSpec defaults;
  ASSERT_EQ(Message(ParseBackendConfig(Json(R"({"cmdline": {}})"), &defaults)), "");
  EXPECT_EQ(defaults.default_device_ids, (std::vector<int32_t>{0}));
  EXPECT_EQ(defaults.telemetry_interval_ms, 1000);

  BackendConfigSpec bad;
  EXPECT_EQ(
      Message(ParseBackendConfig(
          Json(R"({"cmdline": {"telemetry_interval_ms": "5"}})"), &bad)),
      "--backend-config=npu_ge,telemetry_interval_ms: expected an integer in "
      "[10, 3600000], got '5'");
}

TEST(BackendConfig, KeepsGeOptionsWarnsLegacyKeysRejectsUnknownOnes)
{
  const char* cmdline = R"({"cmdline": {
    "auto-complete-config": "true", "backend-directory": "/b",
    "default-max-batch-size": "4", "min-compute-capability": "6.0",
    "ge.exec.precision_mode": "force_fp16", "static_model": "1"}})";
  BackendConfigSpec with_ge;
  ASSERT_EQ(Message(ParseBackendConfig(Json(cmdline), &with_ge, true)), "");
  EXPECT_EQ(with_ge.ge_options.at("ge.exec.precision_mode"), "force_fp16");
  ASSERT_EQ(with_ge.warnings.size(), 1u);  // static_model only
  EXPECT_EQ(
      with_ge.warnings[0],
      "--backend-config=npu_ge,static_model=1: a setting of the older Ascend GE "
      "backend that npu_ge does not read (ignored): npu_ge takes the batch shape "
      "from the model itself");

  BackendConfigSpec without_ge;
  ASSERT_EQ(Message(ParseBackendConfig(Json(cmdline), &without_ge, false)), "");
  ASSERT_EQ(without_ge.warnings.size(), 2u);
  EXPECT_EQ(
      without_ge.warnings[0],
      "--backend-config=npu_ge,ge.exec.precision_mode=force_fp16: GE options apply "
      "to engine 'ge_graph', which this build lacks (ignored; .om models take "
      "compile options from atc when converted)");

  BackendConfigSpec typo;
  EXPECT_EQ(
      Message(ParseBackendConfig(
          Json(R"({"cmdline": {"telemetry_interval": "100"}})"), &typo, true)),
      "--backend-config=npu_ge,telemetry_interval=100: unknown key; npu_ge reads "
      "device_ids, telemetry_interval_ms, ge.<option> or global.<option> (GE global "
      "options), session.<option> and graph.<option>");
}

namespace {

ModelConfigSpec
Parsed(const std::string& extra)
{
  ModelConfigSpec spec;
  const std::string config =
      R"({"name": "m", "max_batch_size": 0,
    "input": [{"name": "a", "data_type": "TYPE_INT32", "dims": [2]}],
    "output": [{"name": "b", "data_type": "TYPE_INT32", "dims": [2]}])" +
      extra + "}";
  EXPECT_EQ(Message(ParseModelConfig(Json(config.c_str()), &spec)), "");
  return spec;
}

std::vector<std::string>
Holds(std::vector<std::string> files)
{
  return files;
}

}  // namespace

TEST(ResolveModelFile, OnnxOnlyDirectoryPicksGeGraphWhereTheBuildHasIt)
{
  ModelConfigSpec spec = Parsed("");
  std::string note;
  ASSERT_EQ(Message(ResolveModelFile(Holds({"model.onnx"}), true, &spec, &note)), "");
  EXPECT_EQ(spec.engine, EngineKind::kGeGraph);
  EXPECT_EQ(spec.model_filename, "model.onnx");
  EXPECT_EQ(
      note,
      "the version directory holds model.onnx and no model.om, and neither 'engine' "
      "nor default_model_filename is set: using engine 'ge_graph'");

  ModelConfigSpec both = Parsed("");
  ASSERT_EQ(
      Message(ResolveModelFile(Holds({"model.onnx", "model.om"}), true, &both, &note)),
      "");
  EXPECT_EQ(both.engine, EngineKind::kAclOm);  // model.om wins
  EXPECT_EQ(both.model_filename, "model.om");
  EXPECT_EQ(note, "");

  ModelConfigSpec named = Parsed("");  // the older backend took any *.onnx
  ASSERT_EQ(
      Message(
          ResolveModelFile(Holds({"config.txt", "resnet50.onnx"}), true, &named, &note)),
      "");
  EXPECT_EQ(named.model_filename, "resnet50.onnx");
  EXPECT_EQ(named.engine, EngineKind::kGeGraph);

  ModelConfigSpec pinned =
      Parsed(R"(, "parameters": {"engine": {"string_value": "acl_om"}})");
  ASSERT_EQ(Message(ResolveModelFile(Holds({"model.onnx"}), true, &pinned, &note)), "");
  EXPECT_EQ(pinned.model_filename, "model.om");  // what the user chose is kept
}

TEST(ResolveModelFile, WithoutGeGraphNamesWhatTheUserWroteAndWhatToDo)
{
  ModelConfigSpec onnx_only = Parsed("");
  std::string note;
  EXPECT_EQ(
      Message(ResolveModelFile(Holds({"model.onnx"}), false, &onnx_only, &note)),
      "model.onnx needs the ge_graph engine, which this build lacks: convert with ATC "
      "to model.om, or use the image built with the CANN toolkit");

  ModelConfigSpec named = Parsed(R"(, "default_model_filename": "net.onnx")");
  EXPECT_EQ(
      Message(ResolveModelFile(Holds({}), false, &named, &note)),
      "net.onnx needs the ge_graph engine, which this build lacks: convert with ATC "
      "to model.om, or use the image built with the CANN toolkit");

  ModelConfigSpec legacy =
      Parsed(R"(, "parameters": {"EXECUTOR_TYPE": {"string_value": "GE"}})");
  EXPECT_EQ(
      Message(ResolveModelFile(Holds({"model.onnx"}), false, &legacy, &note)),
      "parameter 'EXECUTOR_TYPE' is 'GE', which selects the ge_graph engine (for "
      "model.onnx); this build lacks it: convert with ATC to model.om, or use the "
      "image built with the CANN toolkit (then set 'EXECUTOR_TYPE' to 'acl_om' or "
      "remove it)");

  ModelConfigSpec two = Parsed("");
  EXPECT_EQ(
      Message(ResolveModelFile(Holds({"b.onnx", "a.onnx"}), true, &two, &note)),
      "the version directory holds no model.om or model.onnx but 2 ONNX files "
      "(a.onnx, b.onnx): set default_model_filename to the one to serve");

  ModelConfigSpec om = Parsed("");
  ASSERT_EQ(Message(ResolveModelFile(Holds({}), false, &om, &note)), "");
  EXPECT_EQ(om.model_filename, "model.om");  // missing file: reported by the caller
}

TEST(ModelConfig, LegacyKeysAreNamedInTheirErrors)
{
  ModelConfigSpec spec;
  EXPECT_EQ(
      Message(ParseModelConfig(
          Json(R"({"name": "m", "input": [], "output": [],
    "parameters": {"EXECUTOR_TYPE": {"string_value": "tensorrt"}}})"),
          &spec, false)),
      "parameter 'EXECUTOR_TYPE': expected 'acl_om' or 'ge_graph', got 'tensorrt'");
  ModelConfigSpec ids;
  EXPECT_EQ(
      Message(ParseModelConfig(
          Json(R"({"name": "m", "input": [], "output": [],
    "parameters": {"DEVICE_ID": {"string_value": "npu0"}}})"),
          &ids, false)),
      "parameter 'DEVICE_ID': expected a comma-separated list of device ids like "
      "'0,1', got 'npu0'");
}

TEST(ModelConfig, OlderBackendParametersAreWarnedAboutNotPassedToGe)
{
  ModelConfigSpec spec;
  ASSERT_EQ(
      Message(ParseModelConfig(
          Json(R"({"name": "m", "input": [], "output": [],
    "default_model_filename": "model.onnx",
    "parameters": {"static_model": {"string_value": "1"},
                   "profiling": {"string_value": "dynamic"},
                   "ge.aicoreNum": {"string_value": "12|10"}}})"),
          &spec, false)),
      "");
  EXPECT_EQ(
      spec.options, (std::map<std::string, std::string>{{"ge.aicoreNum", "12|10"}}));
  ASSERT_EQ(spec.warnings.size(), 2u);
  EXPECT_EQ(
      spec.warnings[0],
      "parameter 'profiling' is a setting of the older Ascend GE backend that npu_ge "
      "does not read (ignored): use CANN's own profiling settings in the environment");
  EXPECT_EQ(
      spec.warnings[1],
      "parameter 'static_model' is a setting of the older Ascend GE backend that npu_ge "
      "does not read (ignored): npu_ge takes the batch shape from the model itself");
}

// The public GE backend's scopes: global.<option> (GEInitialize), session.<option>
// and graph.<option> (every ge_graph model's session and graph).
TEST(BackendConfig, TakesThePublicGeBackendsGlobalSessionAndGraphScopes)
{
  const char* cmdline = R"({"cmdline": {
    "global.ge.exec.precision_mode": "force_fp16",
    "session.ge.exec.precision_mode_v2": "fp16", "graph.ge.exec.enableFusion": "1"}})";
  BackendConfigSpec with_ge;
  ASSERT_EQ(Message(ParseBackendConfig(Json(cmdline), &with_ge, true)), "");
  EXPECT_EQ(with_ge.ge_options.at("ge.exec.precision_mode"), "force_fp16");
  EXPECT_EQ(with_ge.ge_session_options.at("ge.exec.precision_mode_v2"), "fp16");
  EXPECT_EQ(with_ge.ge_graph_options.at("ge.exec.enableFusion"), "1");
  EXPECT_TRUE(with_ge.warnings.empty());

  BackendConfigSpec without_ge;
  ASSERT_EQ(Message(ParseBackendConfig(Json(cmdline), &without_ge, false)), "");
  ASSERT_EQ(without_ge.warnings.size(), 3u);
  EXPECT_EQ(  // in key order: global, graph, session
      without_ge.warnings[2],
      "--backend-config=npu_ge,session.ge.exec.precision_mode_v2=fp16: GE session "
      "options apply to engine 'ge_graph', which this build lacks (ignored; .om models "
      "take compile options from atc when converted)");

  BackendConfigSpec twice;
  EXPECT_EQ(
      Message(ParseBackendConfig(
          Json(R"({"cmdline": {"ge.exec.precision_mode": "force_fp16",
                               "global.ge.exec.precision_mode": "allow_fp32_to_fp16"}})"),
          &twice, true)),
      "--backend-config=npu_ge,global.ge.exec.precision_mode=allow_fp32_to_fp16: GE "
      "global option ge.exec.precision_mode is also set to 'force_fp16'; give it once");
}

TEST(ResolveModelFile, ATensorFlowModelIsRefusedNamingTheConversion)
{
  for (bool have_ge_graph : {false, true}) {
    ModelConfigSpec spec;
    std::string note;
    const std::string error =
        Message(ResolveModelFile(Holds({"model.pb"}), have_ge_graph, &spec, &note));
    EXPECT_NE(
        error.find("the version directory holds the TensorFlow model model.pb"),
        std::string::npos)
        << error;
    EXPECT_NE(error.find("atc --framework=3"), std::string::npos) << error;
  }
  ModelConfigSpec with_om;  // a model.om beside it is served as before
  std::string note;
  EXPECT_EQ(
      Message(ResolveModelFile(Holds({"model.om", "model.pb"}), false, &with_om, &note)),
      "");
}

TEST(ResolveModelFile, HoldsModelFileSaysWhetherADirectoryHasSomethingToServe)
{
  ModelConfigSpec plain;  // as ParseModelConfig leaves a config without either key
  plain.model_filename = "model.om";
  EXPECT_TRUE(HoldsModelFile({"model.om"}, plain));
  EXPECT_TRUE(HoldsModelFile({"net.onnx"}, plain));
  EXPECT_TRUE(HoldsModelFile({"model.pb"}, plain));  // refused later, naming the fix
  EXPECT_FALSE(HoldsModelFile({"config.pbtxt", "labels.txt"}, plain));
  ModelConfigSpec named;
  named.model_filename = "resnet.om";
  named.model_filename_set = true;
  EXPECT_FALSE(HoldsModelFile({"net.onnx", "model.om"}, named));
  EXPECT_TRUE(HoldsModelFile({"resnet.om"}, named));
}
