// The GE graph engine's logic over a fake GePort (the real port needs CANN).
#include <cstring>

#include "ge_graph_engine.h"
#include "test_util.h"

using namespace npu_ge;
using npu_ge_test::Message;

namespace {

// Pretends to be GE: y = x + 1 over FP32, records what the engine asked for.
class FakeGePort : public GePort {
 public:
  GeOptions global, session, graph;
  int open_sessions = 0;
  std::vector<size_t> run_input_bytes;

  TRITONSERVER_Error* Initialize(const GeOptions& g) override
  {
    global = g;
    return nullptr;
  }
  TRITONSERVER_Error* Describe(const std::string&, ModelIoDesc* io) override
  {
    ModelTensorDesc x;
    x.name = "x";
    x.dtype = TRITONSERVER_TYPE_FP32;
    x.dims = {-1, 2};
    ModelTensorDesc y = x;
    y.name = "y";
    io->inputs = {x};
    io->input_model_index = {0};
    io->outputs = {y};
    return nullptr;
  }
  TRITONSERVER_Error* OpenSession(
      const std::string&, const GeOptions& s, const GeOptions& g, uint64_t* id) override
  {
    session = s;
    graph = g;
    *id = static_cast<uint64_t>(++open_sessions);
    return nullptr;
  }
  TRITONSERVER_Error* Run(
      uint64_t, const std::vector<const void*>& in, const std::vector<size_t>& in_bytes,
      const std::vector<void*>& out, const std::vector<size_t>& out_bytes) override
  {
    run_input_bytes = in_bytes;
    const float* x = static_cast<const float*>(in[0]);
    float* y = static_cast<float*>(out[0]);
    for (size_t i = 0; i < out_bytes[0] / sizeof(float); ++i) y[i] = x[i] + 1;
    return nullptr;
  }
  void CloseSession(uint64_t) override { --open_sessions; }
};

ModelConfigSpec
Spec()
{
  ModelConfigSpec spec;
  spec.max_batch_size = 4;
  spec.engine = EngineKind::kGeGraph;
  spec.model_filename = "model.onnx";
  spec.inputs = {{"x", TRITONSERVER_TYPE_FP32, {2}}};
  spec.outputs = {{"y", TRITONSERVER_TYPE_FP32, {2}}};
  spec.options = {
      {"ge.exec.precision_mode", "must_keep_origin_dtype"},
      {"session.ge.exec.dynamicGraphExecuteMode", "dynamic_execute"},
      {"graph.ge.exec.enableFusion", "1"}};
  return spec;
}

}  // namespace

TEST(GeGraphEngine, SplitsOptionScopesAndPinsTheDevice)
{
  auto port = std::make_shared<FakeGePort>();
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Message(CreateGeGraphEngine(port, Spec(), "/m/1/model.onnx", &engine)), "");
  EXPECT_EQ(port->global.at("ge.graphRunMode"), "0");
  EXPECT_EQ(port->global.at("ge.exec.precision_mode"), "must_keep_origin_dtype");
  std::unique_ptr<EngineInstance> inst;
  ASSERT_EQ(Message(engine->CreateInstance(3, &inst)), "");
  EXPECT_EQ(port->session.at("ge.exec.deviceId"), "3");
  EXPECT_EQ(port->session.at("ge.exec.dynamicGraphExecuteMode"), "dynamic_execute");
  EXPECT_EQ(port->graph.at("ge.exec.enableFusion"), "1");
  EXPECT_EQ(
      port->graph.at("ge.inputShape"), "x:4,2");  // compiled for max_batch_size rows
  inst.reset();
  EXPECT_EQ(port->open_sessions, 0);  // the session closes with the instance
}

TEST(GeGraphEngine, RunsPaddedBatchesThroughThePort)
{
  auto port = std::make_shared<FakeGePort>();
  std::unique_ptr<Engine> engine;
  ASSERT_EQ(Message(CreateGeGraphEngine(port, Spec(), "/m/1/model.onnx", &engine)), "");
  EXPECT_EQ(engine->binding().static_batch, 4u);
  std::unique_ptr<EngineInstance> inst;
  ASSERT_EQ(Message(engine->CreateInstance(0, &inst)), "");
  const float x[4] = {1, 2, 3, 4};
  std::memcpy(inst->InputStaging(0), x, sizeof(x));
  uint64_t start = 0, end = 0;
  ASSERT_EQ(Message(inst->Run(2, &start, &end)), "");
  EXPECT_LE(start, end);
  EXPECT_EQ(port->run_input_bytes, (std::vector<size_t>{4 * 2 * sizeof(float)}));
  const float* y = reinterpret_cast<const float*>(inst->OutputStaging(0));
  EXPECT_EQ(std::vector<float>(y, y + 4), (std::vector<float>{2, 3, 4, 5}));
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
