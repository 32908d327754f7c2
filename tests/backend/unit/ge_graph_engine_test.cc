// The GE graph engine's logic over a fake GePort (the real port needs CANN),
// and the ONNX reader it binds the configuration with.
#include <cstdio>
#include <cstring>
#include <fstream>

#include "batching.h"
#include "ge_graph_engine.h"
#include "onnx_info.h"
#include "test_util.h"

using namespace npu_ge;
using npu_ge_test::Message;

namespace {

// -- a minimal protobuf writer, to make ONNX files the way onnx.proto lays them out
std::string
Varint(uint64_t v)
{
  std::string s;
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    s.push_back(static_cast<char>(v ? (b | 0x80) : b));
  } while (v);
  return s;
}
std::string
Bytes(uint32_t field, const std::string& payload)
{
  return Varint(field << 3 | 2) + Varint(payload.size()) + payload;
}
std::string
Int(uint32_t field, uint64_t v)
{
  return Varint(field << 3) + Varint(v);
}
// ValueInfoProto{name, type{tensor_type{elem_type, shape{dim...}}}}; dim < 0: dim_param.
std::string
ValueInfo(const std::string& name, uint64_t elem, const std::vector<int64_t>& dims)
{
  std::string shape;
  for (int64_t d : dims) {
    shape += Bytes(1, d < 0 ? Bytes(2, "batch") : Int(1, static_cast<uint64_t>(d)));
  }
  return Bytes(1, name) + Bytes(2, Bytes(1, Int(1, elem) + Bytes(2, shape)));
}
// ModelProto{ir_version, graph{initializer w, input x (+ w), output a, b}}.
std::string
OnnxModel()
{
  std::string graph = Bytes(5, Bytes(8, "w")) + Bytes(11, ValueInfo("x", 1, {-1, 2})) +
                      Bytes(11, ValueInfo("w", 1, {2})) +
                      Bytes(12, ValueInfo("a", 1, {-1, 2})) +
                      Bytes(12, ValueInfo("b", 7, {-1, 1}));
  return Int(1, 7) + Bytes(7, graph);
}

std::string
WriteTemp(const std::string& bytes)
{
  std::string path = ::testing::TempDir() + "npu_ge_model_" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                     ".onnx";
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Pretends to be GE for the model above: a = x + 1 (FP32), b = row index
// (INT64); records what the engine asked for.
class FakeGePort : public GePort {
 public:
  std::vector<GeOptions> inits;
  GeOptions session, graph;
  GeGraphIo io;
  int open_sessions = 0, compiled = 0, runs = 0;
  bool fail_init = false;

  TRITONSERVER_Error* Initialize(const GeOptions& g) override
  {
    inits.push_back(g);
    return fail_init ? TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "GE down")
                     : nullptr;
  }
  TRITONSERVER_Error* OpenSession(
      const std::string&, const GeOptions& s, const GeOptions& g, const GeGraphIo& i,
      int32_t, uint64_t* id, size_t* device_bytes) override
  {
    session = s;
    graph = g;
    io = i;
    ++compiled;  // the real port compiles here (Session::BuildGraph)
    *device_bytes = 4096;
    *id = static_cast<uint64_t>(++open_sessions);
    return nullptr;
  }
  // a = x + 1, b = row index, over the rows of the run; answers at once unless
  // `hold` is set (then the test calls back with Release, or never).
  bool hold = false;
  std::vector<GeRunDone> held;
  std::vector<std::vector<int64_t>> run_dims;
  TRITONSERVER_Error* RunAsync(
      uint64_t, const std::vector<GeRunInput>& in, GeRunDone done) override
  {
    ++runs;
    run_dims.push_back(in[0].dims);
    const int64_t rows = in[0].dims[0];
    std::vector<float> a(static_cast<size_t>(rows) * 2);
    const float* x = static_cast<const float*>(in[0].data);
    for (size_t i = 0; i < a.size(); ++i) a[i] = x[i] + 1;
    if (hold) {
      held.push_back(std::move(done));
      return nullptr;
    }
    std::vector<int64_t> b(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) b[static_cast<size_t>(r)] = r;
    done(
        nullptr, {{a.data(), a.size() * sizeof(float), {rows, 2}},
                  {b.data(), b.size() * sizeof(int64_t), {rows, 1}}});
    return nullptr;
  }
  // Calls back the i-th held run, late, with outputs full of `value`.
  void Release(size_t i, float value, int64_t rows)
  {
    std::vector<float> a(static_cast<size_t>(rows) * 2, value);
    std::vector<int64_t> b(static_cast<size_t>(rows), static_cast<int64_t>(value));
    held.at(i)(
        nullptr, {{a.data(), a.size() * sizeof(float), {rows, 2}},
                  {b.data(), b.size() * sizeof(int64_t), {rows, 1}}});
  }
  void CloseSession(uint64_t) override { --open_sessions; }
  void Finalize() override { ++finalized; }
  int finalized = 0;
};

// The config lists the outputs in another order than the ONNX graph.
ModelConfigSpec
Spec(const std::string& name = "m")
{
  ModelConfigSpec spec;
  spec.name = name;
  spec.max_batch_size = 4;
  spec.engine = EngineKind::kGeGraph;
  spec.model_filename = "model.onnx";
  spec.inputs = {{"x", TRITONSERVER_TYPE_FP32, {2}}};
  spec.outputs = {
      {"b", TRITONSERVER_TYPE_INT64, {1}}, {"a", TRITONSERVER_TYPE_FP32, {2}}};
  spec.options = {
      {"ge.exec.precision_mode", "must_keep_origin_dtype"},
      {"session.ge.exec.dynamicGraphExecuteMode", "dynamic_execute"},
      {"graph.ge.exec.enableFusion", "1"}};
  return spec;
}

struct Fixture {
  std::shared_ptr<FakeGePort> port = std::make_shared<FakeGePort>();
  std::shared_ptr<GeGlobal> ge;
  std::string path = WriteTemp(OnnxModel());
  explicit Fixture(GeOptions backend = {})
      : ge(std::make_shared<GeGlobal>(port, std::move(backend)))
  {
  }
};

}  // namespace

TEST(OnnxInfo, ReadsGraphInputsWithoutInitializersAndOutputsInOrder)
{
  ModelIoDesc io;
  ASSERT_EQ(Message(ReadOnnxIo(OnnxModel(), "model.onnx", &io)), "");
  ASSERT_EQ(io.inputs.size(), 1u);  // 'w' is an initializer
  EXPECT_EQ(io.inputs[0].name, "x");
  EXPECT_EQ(io.inputs[0].dtype, TRITONSERVER_TYPE_FP32);
  EXPECT_EQ(io.inputs[0].dims, (std::vector<int64_t>{-1, 2}));  // dim_param -> -1
  ASSERT_EQ(io.outputs.size(), 2u);
  EXPECT_EQ(io.outputs[0].name, "a");
  EXPECT_EQ(io.outputs[1].name, "b");
  EXPECT_EQ(io.outputs[1].dtype, TRITONSERVER_TYPE_INT64);
  EXPECT_EQ(io.outputs[1].dims, (std::vector<int64_t>{-1, 1}));
}

TEST(OnnxInfo, NamesTheFileWhenItIsNotOnnxOrHasNoTensors)
{
  ModelIoDesc io;
  EXPECT_EQ(
      Message(ReadOnnxIo("onnx bytes\n", "net.onnx", &io)),
      "net.onnx is not an ONNX model (its protobuf cannot be read)");
  EXPECT_EQ(
      Message(ReadOnnxIo(Bytes(7, Bytes(11, ValueInfo("x", 1, {2}))), "net.onnx", &io)),
      "net.onnx declares 1 input(s) and 0 output(s); npu_ge needs at least one of each");
  ModelIoDesc strings;
  ASSERT_EQ(
      Message(ReadOnnxIo(
          Bytes(7, Bytes(11, ValueInfo("s", 8, {1})) + Bytes(12, ValueInfo("y", 1, {1}))),
          "net.onnx", &strings)),
      "");
  EXPECT_FALSE(strings.inputs[0].dtype_known);
  EXPECT_EQ(strings.inputs[0].dtype_name, "STRING");
}

TEST(GeGraphEngine, CompilesAtLoadWithShapesAndDtypesAndReportsDeviceMemory)
{
  Fixture f;
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Message(CreateGeGraphEngine(f.ge, Spec(), f.path, &engine)), "");
  std::unique_ptr<EngineInstance> inst;
  ASSERT_EQ(Message(engine->CreateInstance(3, &inst)), "");
  EXPECT_EQ(f.port->compiled, 1);  // when the instance is created, before any request
  EXPECT_EQ(f.port->runs, 0);
  ASSERT_EQ(f.port->io.inputs.size(), 1u);
  EXPECT_EQ(f.port->io.inputs[0].name, "x");
  EXPECT_EQ(f.port->io.inputs[0].dtype, TRITONSERVER_TYPE_FP32);
  // ONNX x [batch, 2] with max_batch_size 4: compiled for the batch range 1~4
  EXPECT_EQ(f.port->io.inputs[0].dims, (std::vector<int64_t>{-1, 2}));
  EXPECT_EQ(f.port->io.outputs[1].dims, (std::vector<int64_t>{-1, 1}));
  EXPECT_EQ(inst->DeviceBytes(), 4096u);
  EXPECT_EQ(f.port->session.at("ge.exec.deviceId"), "3");
  EXPECT_EQ(f.port->session.at("ge.exec.dynamicGraphExecuteMode"), "dynamic_execute");
  EXPECT_EQ(f.port->graph.at("ge.exec.enableFusion"), "1");
  EXPECT_EQ(f.port->graph.at("ge.inputShape"), "x:1~4,2");
  ASSERT_EQ(f.port->inits.size(), 1u);
  EXPECT_EQ(f.port->inits[0].at("ge.graphRunMode"), "0");
  EXPECT_EQ(f.port->inits[0].at("ge.exec.precision_mode"), "must_keep_origin_dtype");
  inst.reset();
  EXPECT_EQ(f.port->open_sessions, 0);  // the session closes with the instance
}

TEST(GeGraphEngine, OutputsMapToTheOnnxNamesWhateverTheConfigOrder)
{
  Fixture f;
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Message(CreateGeGraphEngine(f.ge, Spec(), f.path, &engine)), "");
  EXPECT_EQ(engine->binding().static_batch, 4u);
  std::unique_ptr<EngineInstance> inst;
  ASSERT_EQ(Message(engine->CreateInstance(0, &inst)), "");
  const float x[4] = {1, 2, 3, 4};
  std::memcpy(inst->InputStaging(0), x, sizeof(x));
  uint64_t start = 0, end = 0;
  ASSERT_EQ(Message(inst->Run(2, &start, &end)), "");
  EXPECT_LE(start, end);
  // config output 0 is ONNX output 'b', config output 1 is 'a'
  const int64_t* b = reinterpret_cast<const int64_t*>(inst->OutputStaging(0));
  EXPECT_EQ(std::vector<int64_t>(b, b + 2), (std::vector<int64_t>{0, 1}));
  const float* a = reinterpret_cast<const float*>(inst->OutputStaging(1));
  EXPECT_EQ(std::vector<float>(a, a + 4), (std::vector<float>{2, 3, 4, 5}));
}

TEST(GeGraphEngine, ConfigNamesThatAreNotOnnxNamesAreRefused)
{
  Fixture f;
  ModelConfigSpec spec = Spec();
  spec.outputs[0].name = "output0";
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(
      Message(CreateGeGraphEngine(f.ge, spec, f.path, &engine)),
      "output 'output0' not found in model.onnx (its outputs: a, b)");
  EXPECT_TRUE(f.port->inits.empty());  // nothing initialized for a refused config
}

TEST(GeGlobal, BackendOptionsAndTheFirstModelsAreMergedIntoGeInitialize)
{
  Fixture f(
      GeOptions{
          {"ge.exec.precision_mode", "must_keep_origin_dtype"}, {"ge.aicoreNum", "8|8"}});
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Message(CreateGeGraphEngine(f.ge, Spec(), f.path, &engine)), "");
  ASSERT_EQ(f.port->inits.size(), 1u);
  EXPECT_EQ(f.port->inits[0].at("ge.aicoreNum"), "8|8");
  EXPECT_EQ(f.port->inits[0].at("ge.exec.precision_mode"), "must_keep_origin_dtype");

  Fixture conflict(GeOptions{{"ge.exec.precision_mode", "force_fp16"}});
  EXPECT_EQ(
      Message(CreateGeGraphEngine(conflict.ge, Spec(), conflict.path, &engine)),
      "parameter 'ge.exec.precision_mode' is 'must_keep_origin_dtype', but "
      "--backend-config=npu_ge,ge.exec.precision_mode=force_fp16 sets it for the whole "
      "process: GE global options are process-wide; remove the parameter or use the "
      "same value");
  EXPECT_TRUE(conflict.port->inits.empty());
}

TEST(GeGlobal, LaterModelsOptionsAreMergedIntoTheirSessionOrRefusedLoudly)
{
  Fixture f;
  std::unique_ptr<Engine> first, second, third;
  ASSERT_EQ(Message(CreateGeGraphEngine(f.ge, Spec("first"), f.path, &first)), "");

  ModelConfigSpec more = Spec("second");
  more.options["ge.aicoreNum"] = "4|4";  // GE was initialized without it
  ASSERT_EQ(Message(CreateGeGraphEngine(f.ge, more, f.path, &second)), "");
  EXPECT_EQ(f.port->inits.size(), 1u);  // GEInitialize ran once
  std::unique_ptr<EngineInstance> inst;
  ASSERT_EQ(Message(second->CreateInstance(0, &inst)), "");
  EXPECT_EQ(f.port->session.at("ge.aicoreNum"), "4|4");  // merged, not dropped

  ModelConfigSpec clash = Spec("third");
  clash.options["ge.exec.precision_mode"] = "force_fp16";
  EXPECT_EQ(
      Message(CreateGeGraphEngine(f.ge, clash, f.path, &third)),
      "parameter 'ge.exec.precision_mode' is 'force_fp16', but GE is already "
      "initialized in this process with ge.exec.precision_mode='must_keep_origin_dtype' "
      "(from model 'first'): GE global options are process-wide; use "
      "'must_keep_origin_dtype', or set it once for every model with "
      "--backend-config=npu_ge,ge.exec.precision_mode=<value> and restart the server");
}

TEST(GeGlobal, AFailedInitializeIsRetriedByTheNextModel)
{
  Fixture f;
  f.port->fail_init = true;
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(Message(CreateGeGraphEngine(f.ge, Spec(), f.path, &engine)), "GE down");
  f.port->fail_init = false;
  ASSERT_EQ(Message(CreateGeGraphEngine(f.ge, Spec(), f.path, &engine)), "");
  EXPECT_EQ(f.port->inits.size(), 2u);
}

TEST(GeGraphEngine, RejectsOptionsOutsideTheKnownScopes)
{
  ModelConfigSpec spec = Spec();
  spec.options["precision"] = "fp16";
  GeOptionSets sets;
  EXPECT_EQ(
      Message(BuildGeOptions(spec, &sets)),
      "parameter 'precision': expected a 'ge.*', 'session.*' or 'graph.*' option for "
      "engine 'ge_graph'");
}

TEST(GeGlobal, GraphRunModeDefaultsToInferenceUnlessTheBackendConfigSetsIt)
{
  Fixture f(GeOptions{{"ge.graphRunMode", "1"}});
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Message(CreateGeGraphEngine(f.ge, Spec(), f.path, &engine)), "");
  EXPECT_EQ(f.port->inits.at(0).at("ge.graphRunMode"), "1");  // what the operator wrote
  ModelConfigSpec clash = Spec("second");
  clash.options["ge.graphRunMode"] = "0";
  EXPECT_NE(
      Message(CreateGeGraphEngine(f.ge, clash, f.path, &engine))
          .find("(from --backend-config)"),
      std::string::npos);
}

TEST(GeGlobal, FinalizesGeOnceWhenTheLastHolderGoesAndOnlyAfterAnInitialize)
{
  Fixture never;  // no ge_graph model ever loaded: GEInitialize never ran
  std::shared_ptr<FakeGePort> idle = never.port;
  never.ge.reset();
  EXPECT_EQ(idle->finalized, 0);

  Fixture f;
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Message(CreateGeGraphEngine(f.ge, Spec(), f.path, &engine)), "");
  std::shared_ptr<FakeGePort> port = f.port;
  f.ge.reset();  // the engine still holds GE
  EXPECT_EQ(port->finalized, 0);
  engine.reset();
  EXPECT_EQ(port->finalized, 1);
}

TEST(GeGraphEngine, AUsersInputShapeMustBeTheOneNpuGeCompilesFor)
{
  ModelConfigSpec same = Spec();
  same.options["graph.ge.inputShape"] = "x: 4, 2";  // spaces aside, what npu_ge compiles
  GeOptionSets sets;
  ASSERT_EQ(Message(BuildGeOptions(same, &sets)), "");
  EXPECT_EQ(sets.graph.at("ge.inputShape"), "x:4,2");

  ModelConfigSpec other = Spec();
  other.options["graph.ge.inputShape"] = "x:1,2";
  EXPECT_EQ(
      Message(BuildGeOptions(other, &sets)),
      "parameter 'graph.ge.inputShape' is 'x:1,2', but npu_ge compiles the graph for "
      "'x:4,2' (max_batch_size rows of each config input's dims) and sizes its buffers "
      "for it: remove the parameter, or change max_batch_size or the input dims so that "
      "they give the shapes you want");
}

TEST(GeGraphEngine, BackendConfigSessionAndGraphOptionsReachEveryModelUnderItsOwn)
{
  GeOptionSets backend;
  backend.session = {{"ge.exec.precision_mode_v2", "fp16"}, {"ge.exec.x", "backend"}};
  backend.graph = {{"ge.exec.enableFusion", "0"}};
  ModelConfigSpec spec = Spec();  // its own graph.ge.exec.enableFusion is "1"
  spec.options["session.ge.exec.x"] = "model";
  GeOptionSets sets;
  ASSERT_EQ(Message(BuildGeOptions(spec, &sets, backend)), "");
  EXPECT_EQ(sets.session.at("ge.exec.precision_mode_v2"), "fp16");
  EXPECT_EQ(sets.session.at("ge.exec.x"), "model");
  EXPECT_EQ(sets.graph.at("ge.exec.enableFusion"), "1");

  backend.graph["ge.inputShape"] = "x:1,2";
  EXPECT_EQ(
      Message(BuildGeOptions(Spec(), &sets, backend)).substr(0, 89),
      "--backend-config=npu_ge,graph.ge.inputShape is 'x:1,2', but npu_ge compiles the "
      "graph for");
}

// The public backend's repositories: ONNX x [bs, 2] with max_batch_size 0 and the
// config [3, 2]; GE compiles what npu_ge gives it, so the config's value is used.
TEST(GeGraphEngine, AConfigGivesSymbolicOnnxDimsTheirCompiledValue)
{
  Fixture f;
  ModelConfigSpec spec = Spec();
  spec.max_batch_size = 0;
  spec.inputs = {{"x", TRITONSERVER_TYPE_FP32, {3, 2}}};
  spec.outputs = {
      {"b", TRITONSERVER_TYPE_INT64, {3, 1}}, {"a", TRITONSERVER_TYPE_FP32, {3, 2}}};
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Message(CreateGeGraphEngine(f.ge, spec, f.path, &engine)), "");
  std::unique_ptr<EngineInstance> inst;
  ASSERT_EQ(Message(engine->CreateInstance(0, &inst)), "");
  EXPECT_EQ(f.port->io.inputs[0].dims, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(f.port->io.outputs[1].dims, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(f.port->graph.at("ge.inputShape"), "x:3,2");

  ModelConfigSpec open = spec;  // a -1 the config leaves open is still refused
  open.inputs = {{"x", TRITONSERVER_TYPE_FP32, {-1, 2}}};
  EXPECT_NE(
      Message(CreateGeGraphEngine(f.ge, open, f.path, &engine))
          .find("only a dynamic batch dimension is supported"),
      std::string::npos);
}

// ONNX x [batch, 2] served with max_batch_size 4 (the public backend's default,
// static_model off): each batch runs with its own rows, never padded to 4.
TEST(GeGraphEngine, ASymbolicBatchRunsEachBatchWithItsOwnRows)
{
  Fixture f;
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Message(CreateGeGraphEngine(f.ge, Spec(), f.path, &engine)), "");
  size_t exec_rows = 0;
  ASSERT_TRUE(engine->binding().ExecRows(3, &exec_rows));
  EXPECT_EQ(exec_rows, 3u);  // before: 4 (padded to max_batch_size)
  EXPECT_FALSE(engine->binding().ExecRows(5, &exec_rows));
  std::unique_ptr<EngineInstance> inst;
  ASSERT_EQ(Message(engine->CreateInstance(0, &inst)), "");
  const float x[6] = {1, 2, 3, 4, 5, 6};
  std::memcpy(inst->InputStaging(0), x, sizeof(x));
  uint64_t start = 0, end = 0;
  ASSERT_EQ(Message(inst->Run(3, &start, &end)), "");
  ASSERT_EQ(Message(inst->Run(1, &start, &end)), "");
  EXPECT_EQ(f.port->run_dims, (std::vector<std::vector<int64_t>>{{3, 2}, {1, 2}}));
  const float* a = reinterpret_cast<const float*>(inst->OutputStaging(1));
  EXPECT_EQ(std::vector<float>(a, a + 2), (std::vector<float>{2, 3}));

  // A fixed ONNX batch is compiled and run as it is (padded).
  Fixture fixed;
  const std::string graph = Bytes(11, ValueInfo("x", 1, {4, 2})) +
                            Bytes(12, ValueInfo("a", 1, {4, 2})) +
                            Bytes(12, ValueInfo("b", 7, {4, 1}));
  fixed.path = WriteTemp(Int(1, 7) + Bytes(7, graph));
  ASSERT_EQ(Message(CreateGeGraphEngine(fixed.ge, Spec(), fixed.path, &engine)), "");
  ASSERT_TRUE(engine->binding().ExecRows(3, &exec_rows));
  EXPECT_EQ(exec_rows, 4u);
  ASSERT_EQ(Message(engine->CreateInstance(0, &inst)), "");
  EXPECT_EQ(fixed.port->graph.at("ge.inputShape"), "x:4,2");
  ASSERT_EQ(Message(inst->Run(4, &start, &end)), "");
  EXPECT_EQ(fixed.port->run_dims, (std::vector<std::vector<int64_t>>{{4, 2}}));
}

TEST(GeGraphEngine, ADynamicBatchsInputShapeIsTheRangeAUsersMustMatch)
{
  GeOptionSets sets;
  ASSERT_EQ(Message(BuildGeOptions(Spec(), &sets, {}, true)), "");
  EXPECT_EQ(sets.graph.at("ge.inputShape"), "x:1~4,2");
  ModelConfigSpec other = Spec();
  other.options["graph.ge.inputShape"] = "x:4,2";
  EXPECT_EQ(
      Message(BuildGeOptions(other, &sets, {}, true)),
      "parameter 'graph.ge.inputShape' is 'x:4,2', but npu_ge compiles the graph for "
      "'x:1~4,2' (1~max_batch_size rows of each config input's dims) and sizes its "
      "buffers for it: remove the parameter, or change max_batch_size or the input dims "
      "so that they give the shapes you want");
}

// execute_timeout_ms bounds a GE run: past it the run is abandoned, its late
// outputs never reach the staging, its session is parked (closed only once
// the run came back) and the instance compiles a new session.
TEST(GeGraphEngine, ARunPastExecuteTimeoutIsAbandonedItsSessionParkedAndRebuilt)
{
  Fixture f;
  ModelConfigSpec spec = Spec();
  spec.execute_timeout_ms = 50;
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Message(CreateGeGraphEngine(f.ge, spec, f.path, &engine)), "");
  std::unique_ptr<EngineInstance> inst;
  ASSERT_EQ(Message(engine->CreateInstance(0, &inst)), "");
  const float x[2] = {1, 2};
  std::memcpy(inst->InputStaging(0), x, sizeof(x));
  uint64_t start = 0, end = 0;
  ASSERT_EQ(Message(inst->Run(1, &start, &end)), "");  // answered: a = 2, 3
  f.port->hold = true;
  const std::string error = Message(inst->Run(1, &start, &end));
  EXPECT_EQ(
      error,
      "the GE graph run did not finish within execute_timeout_ms=50 ms; it is abandoned "
      "(its late outputs are discarded) and its GE session 1 parked until the model "
      "unloads; the instance compiles a new session before its next request");
  EXPECT_GE(end - start, 50u * 1000 * 1000);
  EXPECT_TRUE(inst->NeedsRecovery());
  EXPECT_EQ(f.port->open_sessions, 1);  // parked, not closed under the running graph
  ASSERT_EQ(Message(inst->Recover()), "");
  EXPECT_FALSE(inst->NeedsRecovery());
  EXPECT_EQ(f.port->compiled, 2);
  EXPECT_EQ(f.port->open_sessions, 2);
  f.port->Release(0, 99, 1);  // the abandoned run returns late
  const float* a = reinterpret_cast<const float*>(inst->OutputStaging(1));
  EXPECT_EQ(std::vector<float>(a, a + 2), (std::vector<float>{2, 3}));  // not 99
  f.port->hold = false;
  const float y[2] = {5, 6};
  std::memcpy(inst->InputStaging(0), y, sizeof(y));
  ASSERT_EQ(Message(inst->Run(1, &start, &end)), "");  // the new session serves
  EXPECT_EQ(std::vector<float>(a, a + 2), (std::vector<float>{6, 7}));
  inst.reset();
  EXPECT_EQ(f.port->open_sessions, 0);  // the parked one too: its run came back
}

TEST(GeGraphEngine, ASessionWhoseRunNeverReturnsIsLeftOpenAndGeNotFinalized)
{
  Fixture f;
  ModelConfigSpec spec = Spec();
  spec.execute_timeout_ms = 10;
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Message(CreateGeGraphEngine(f.ge, spec, f.path, &engine)), "");
  std::unique_ptr<EngineInstance> inst;
  ASSERT_EQ(Message(engine->CreateInstance(0, &inst)), "");
  f.port->hold = true;
  uint64_t start = 0, end = 0;
  EXPECT_NE(Message(inst->Run(1, &start, &end)), "");
  std::shared_ptr<FakeGePort> port = f.port;
  inst.reset();
  engine.reset();
  f.ge.reset();
  EXPECT_EQ(port->open_sessions, 1);  // never closed under the running graph
  EXPECT_EQ(port->finalized, 0);      // nor GE finalized under it
  port->Release(0, 1, 1);             // writes nowhere: the run was abandoned
}

// Found by reasoning about the fuzzer's reach (tests/backend/test_onnx_fuzz.py):
// fixed dims whose product overflows int64 wrapped (undefined behaviour) into
// a small staging size; a negative dim_value read as a negative dim.
TEST(OnnxInfo, DimsWhoseElementCountOverflowsAreRefusedAndNegativeDimsAreUnknown)
{
  ModelIoDesc io;
  const int64_t huge = int64_t{1} << 40;
  EXPECT_EQ(
      Message(ReadOnnxIo(
          Bytes(
              7, Bytes(11, ValueInfo("x", 1, {huge, huge})) +
                     Bytes(12, ValueInfo("y", 1, {1}))),
          "net.onnx", &io)),
      "net.onnx: tensor 'x' has dims [1099511627776,1099511627776], more elements than a "
      "64-bit count holds");
  EXPECT_EQ(ElementCount({huge, huge}), -1);
  EXPECT_EQ(ElementCount({huge, 4}), huge * 4);
  const std::string minus_five = Bytes(1, Bytes(1, Varint(static_cast<uint64_t>(-5))));
  const std::string x =
      Bytes(1, "x") + Bytes(2, Bytes(1, Int(1, 1) + Bytes(2, minus_five)));
  ASSERT_EQ(
      Message(ReadOnnxIo(
          Bytes(7, Bytes(11, x) + Bytes(12, ValueInfo("y", 1, {1}))), "n", &io)),
      "");
  EXPECT_EQ(io.inputs[0].dims, (std::vector<int64_t>{-1}));
}
