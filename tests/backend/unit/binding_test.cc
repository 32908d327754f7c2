#include "model_config.h"
#include "test_util.h"

using namespace npu_ge;
using npu_ge_test::Message;

namespace {

ModelConfigSpec
Spec(int64_t max_batch, TRITONSERVER_DataType in_type = TRITONSERVER_TYPE_FP32)
{
  ModelConfigSpec spec;
  spec.max_batch_size = max_batch;
  spec.model_filename = "model.om";
  spec.inputs = {{"x", in_type, {4}}, {"y", TRITONSERVER_TYPE_INT8, {2, 2}}};
  spec.outputs = {{"z", TRITONSERVER_TYPE_FP32, {4}}};
  return spec;
}

ModelTensorDesc
Tensor(const char* name, TRITONSERVER_DataType t, std::vector<int64_t> dims)
{
  ModelTensorDesc d;
  d.name = name;
  d.dtype = t;
  d.dims = std::move(dims);
  return d;
}

// An .om with inputs (y, x) in the other order, dynamic batch gears.
ModelIoDesc
GearedModel()
{
  ModelIoDesc io;
  io.inputs = {
      Tensor("y", TRITONSERVER_TYPE_INT8, {-1, 2, 2}),
      Tensor("x", TRITONSERVER_TYPE_FP32, {-1, 4})};
  io.outputs = {Tensor("z", TRITONSERVER_TYPE_FP32, {-1, 4})};
  io.gears = {8, 1, 4, 2};
  io.has_dynamic_batch_input = true;
  return io;
}

}  // namespace

TEST(Binding, MapsTensorsByNameAndSortsGears)
{
  IoBinding b;
  ASSERT_EQ(Message(BindConfigToModel(Spec(8), GearedModel(), "model.om", &b)), "");
  EXPECT_EQ(b.input_index, (std::vector<size_t>{1, 0}));
  EXPECT_EQ(b.output_index, (std::vector<size_t>{0}));
  EXPECT_EQ(b.gears, (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(b.max_exec_rows, 8u);
  size_t rows = 0;
  ASSERT_TRUE(b.ExecRows(3, &rows));
  EXPECT_EQ(rows, 4u);
  EXPECT_FALSE(b.ExecRows(9, &rows));
  EXPECT_FALSE(b.ExecRows(0, &rows));
}

TEST(Binding, DtypeMismatchSaysExpectedAndGot)
{
  IoBinding b;
  EXPECT_EQ(
      Message(BindConfigToModel(
          Spec(8, TRITONSERVER_TYPE_FP16), GearedModel(), "model.om", &b)),
      "input 'x': expected data type FP32 (as in model.om), got FP16");
}

TEST(Binding, BytesIsNotSupportedByOmModels)
{
  IoBinding b;
  EXPECT_EQ(
      Message(BindConfigToModel(
          Spec(8, TRITONSERVER_TYPE_BYTES), GearedModel(), "model.om", &b)),
      "input 'x': data type BYTES is not supported by .om models");
}

TEST(Binding, DimsMismatchShowsBothShapes)
{
  ModelConfigSpec spec = Spec(8);
  spec.inputs[0].dims = {5};
  IoBinding b;
  EXPECT_EQ(
      Message(BindConfigToModel(spec, GearedModel(), "model.om", &b)),
      "input 'x': expected dims [4] (model.om dims [-1,4] without the batch "
      "dimension), got [5]");
}

TEST(Binding, CountAndNameMismatches)
{
  ModelConfigSpec spec = Spec(8);
  spec.inputs.pop_back();
  IoBinding b;
  EXPECT_EQ(
      Message(BindConfigToModel(spec, GearedModel(), "model.om", &b)),
      "expected 2 input(s) (y, x in model.om), got 1 in the model configuration");
  spec = Spec(8);
  spec.outputs[0].name = "out";
  EXPECT_EQ(
      Message(BindConfigToModel(spec, GearedModel(), "model.om", &b)),
      "output 'out' not found in model.om (its outputs: z)");
}

TEST(Binding, MaxBatchSizeMustFitTheLargestGear)
{
  IoBinding b;
  EXPECT_EQ(
      Message(BindConfigToModel(Spec(16), GearedModel(), "model.om", &b)),
      "expected max_batch_size <= 8 (largest batch gear of model.om), got 16");
}

TEST(Binding, StaticBatchModelPadsToItsBatch)
{
  ModelIoDesc io;
  io.inputs = {
      Tensor("x", TRITONSERVER_TYPE_FP32, {4, 4}),
      Tensor("y", TRITONSERVER_TYPE_INT8, {4, 2, 2})};
  io.outputs = {Tensor("z", TRITONSERVER_TYPE_FP32, {4, 4})};
  IoBinding b;
  ASSERT_EQ(Message(BindConfigToModel(Spec(3), io, "model.om", &b)), "");
  EXPECT_EQ(b.static_batch, 4u);
  size_t rows = 0;
  ASSERT_TRUE(b.ExecRows(1, &rows));
  EXPECT_EQ(rows, 4u);
  EXPECT_EQ(
      Message(BindConfigToModel(Spec(5), io, "model.om", &b)),
      "expected max_batch_size <= 4 (batch dimension of model.om), got 5");
}

TEST(Binding, UnbatchedModelRunsOneRequestAtATime)
{
  ModelConfigSpec spec = Spec(0);
  spec.inputs[0].dims = {2, 4};
  spec.inputs[1].dims = {2, 2, 2};
  spec.outputs[0].dims = {2, 4};
  ModelIoDesc io;
  io.inputs = {
      Tensor("x", TRITONSERVER_TYPE_FP32, {2, 4}),
      Tensor("y", TRITONSERVER_TYPE_INT8, {2, 2, 2})};
  io.outputs = {Tensor("z", TRITONSERVER_TYPE_FP32, {2, 4})};
  IoBinding b;
  ASSERT_EQ(Message(BindConfigToModel(spec, io, "model.om", &b)), "");
  EXPECT_EQ(b.max_exec_rows, 1u);
  size_t rows = 0;
  EXPECT_TRUE(b.ExecRows(1, &rows));
  EXPECT_FALSE(b.ExecRows(2, &rows));
}

TEST(Binding, GearedModelRequiresBatching)
{
  ModelConfigSpec spec = Spec(0);
  spec.inputs[0].dims = {-1, 4};
  spec.inputs[1].dims = {-1, 2, 2};
  spec.outputs[0].dims = {-1, 4};
  IoBinding b;
  EXPECT_EQ(
      Message(BindConfigToModel(spec, GearedModel(), "model.om", &b)),
      "model.om was compiled with dynamic batch gears [8,1,4,2]; expected "
      "max_batch_size > 0, got 0");
}

TEST(Binding, UnmappableAclTypeIsNamed)
{
  ModelIoDesc io = GearedModel();
  io.inputs[1].dtype_known = false;
  io.inputs[1].dtype_name = "ACL dtype 29";
  IoBinding b;
  EXPECT_EQ(
      Message(BindConfigToModel(Spec(8), io, "model.om", &b)),
      "input 'x': model.om uses ACL dtype 29, which npu_ge cannot serve");
}

// Dynamic AIPP: refused at load naming it, not with the generic count error
// ("expected 2 input(s) (x, ascend_dynamic_aipp_data in model.om), got 1").
TEST(Binding, ADynamicAippModelIsRefusedNamingAclmdlSetInputAipp)
{
  ModelConfigSpec spec = Spec(0);
  spec.inputs = {{"x", TRITONSERVER_TYPE_UINT8, {1, 224, 224, 3}}};
  ModelIoDesc io;
  io.inputs = {
      Tensor("x", TRITONSERVER_TYPE_UINT8, {1, 224, 224, 3}),
      Tensor("ascend_dynamic_aipp_data", TRITONSERVER_TYPE_UINT8, {1, 256})};
  io.outputs = {Tensor("z", TRITONSERVER_TYPE_FP32, {4})};
  IoBinding b;
  EXPECT_EQ(
      Message(BindConfigToModel(spec, io, "model.om", &b)),
      "model.om was compiled with dynamic AIPP (its input ascend_dynamic_aipp_data; atc "
      "--insert_op_conf with aipp_mode: dynamic), whose parameters must be set for each "
      "execution with aclmdlSetInputAIPP; npu_ge does not set them: compile it with "
      "static "
      "AIPP (aipp_mode: static) or without AIPP");
}
