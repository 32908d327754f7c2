// Dims and image size gears: the dims each gear stands for, what a config may
// declare for them, gear choice by request shape, and the binding's checks.
#include "model_config.h"
#include "test_util.h"

using namespace npu_ge;
using npu_ge_test::Message;

namespace {

ModelTensorDesc
Fp32(const char* name, std::vector<int64_t> dims)
{
  ModelTensorDesc d;
  d.name = name;
  d.dtype = TRITONSERVER_TYPE_FP32;
  d.dims = std::move(dims);
  return d;
}

// Like BERT: ids [1,-1] and mask [1,-1] share the length; type [1,2] is fixed.
// CANN lists each gear as every input's full dims, concatenated.
ModelIoDesc
SequenceModel()
{
  ModelIoDesc io;
  io.inputs = {Fp32("ids", {1, -1}), Fp32("mask", {1, -1}), Fp32("type", {1, 2})};
  io.outputs = {Fp32("out", {1, -1})};
  io.has_dynamic_batch_input = true;
  EXPECT_EQ(
      Message(ApplyShapeGears(
          ShapeGearKind::kDims, {{1, 64, 1, 64, 1, 2}, {1, 128, 1, 128, 1, 2}}, &io)),
      "");
  return io;
}

ModelConfigSpec
SequenceConfig(std::vector<int64_t> ids_dims)
{
  ModelConfigSpec spec;
  spec.model_filename = "model.om";
  spec.inputs = {
      {"mask", TRITONSERVER_TYPE_FP32, {1, -1}},  // config order differs from the model's
      {"ids", TRITONSERVER_TYPE_FP32, std::move(ids_dims)},
      {"type", TRITONSERVER_TYPE_FP32, {1, 2}}};
  spec.outputs = {{"out", TRITONSERVER_TYPE_FP32, {1, -1}}};
  return spec;
}

}  // namespace

TEST(ShapeGears, DimsGearsSplitTheConcatenatedDimsByInput)
{
  const ModelIoDesc io = SequenceModel();
  ASSERT_EQ(io.shape_gears.input_dims.size(), 2u);
  EXPECT_EQ(
      io.shape_gears.input_dims[1],
      (std::vector<std::vector<int64_t>>{{1, 128}, {1, 128}, {1, 2}}));
  EXPECT_EQ(
      io.shape_gears.Describe(),
      "dynamic dims gears [1,64,1,64,1,2], [1,128,1,128,1,2] (atc --dynamic_dims)");
}

TEST(ShapeGears, ImageSizeGearsFillHeightAndWidth)
{
  ModelIoDesc io;
  io.inputs = {Fp32("image", {1, 3, -1, -1})};
  ASSERT_EQ(
      Message(ApplyShapeGears(ShapeGearKind::kImageSize, {{224, 224}, {448, 320}}, &io)),
      "");
  EXPECT_EQ(io.shape_gears.input_dims[1][0], (std::vector<int64_t>{1, 3, 448, 320}));
  EXPECT_EQ(io.inputs[0].dims, (std::vector<int64_t>{1, 3, -1, -1}));
  EXPECT_EQ(
      io.shape_gears.Describe(),
      "dynamic image size gears [224x224, 448x320] (atc --dynamic_image_size)");
}

TEST(ShapeGears, ADimEveryGearFixesAlikeIsDeclaredFixed)
{
  ModelIoDesc io;
  io.inputs = {Fp32("x", {-1, -1})};  // gears [2,8] and [2,16]: dim 0 is always 2
  ASSERT_EQ(Message(ApplyShapeGears(ShapeGearKind::kDims, {{2, 8}, {2, 16}}, &io)), "");
  EXPECT_EQ(io.inputs[0].dims, (std::vector<int64_t>{2, -1}));
}

TEST(ShapeGears, TheRequestShapesPickTheGearExactly)
{
  const ShapeGears& gears = SequenceModel().shape_gears;
  size_t gear = 99;
  EXPECT_TRUE(MatchShapeGear(gears, {{1, 128}, {1, 128}, {1, 2}}, &gear));
  EXPECT_EQ(gear, 1u);
  EXPECT_TRUE(MatchShapeGear(gears, {{1, 64}, {1, 64}, {1, 2}}, &gear));
  EXPECT_EQ(gear, 0u);
  EXPECT_FALSE(MatchShapeGear(gears, {{1, 64}, {1, 128}, {1, 2}}, &gear));  // mixed
  EXPECT_FALSE(MatchShapeGear(gears, {{1, 100}, {1, 100}, {1, 2}}, &gear));
}

TEST(ShapeGearsBinding, GearsAreReorderedToTheConfigInputs)
{
  IoBinding b;
  ASSERT_EQ(
      Message(
          BindConfigToModel(SequenceConfig({1, -1}), SequenceModel(), "model.om", &b)),
      "");
  EXPECT_EQ(b.max_exec_rows, 1u);
  ASSERT_EQ(b.shape_gears.input_dims.size(), 2u);
  EXPECT_EQ(b.shape_gears.input_dims[0][0], (std::vector<int64_t>{1, 64}));  // mask
  EXPECT_EQ(b.shape_gears.input_dims[0][2], (std::vector<int64_t>{1, 2}));   // type
  // What CANN is told stays in the model's input order.
  EXPECT_EQ(b.shape_gears.values[0], (std::vector<int64_t>{1, 64, 1, 64, 1, 2}));
}

TEST(ShapeGearsBinding, AFixedDimTheGearsVaryIsRefusedNamingTheGears)
{
  IoBinding b;
  EXPECT_EQ(
      Message(
          BindConfigToModel(SequenceConfig({1, 64}), SequenceModel(), "model.om", &b)),
      "input 'ids': expected dims [1,-1] (model.om dims [1,-1]), got [1,64]; model.om "
      "was "
      "compiled with dynamic dims gears [1,64,1,64,1,2], [1,128,1,128,1,2] (atc "
      "--dynamic_dims)");
}

TEST(ShapeGearsBinding, AMinusOneNoGearVariesIsRefused)
{
  ModelConfigSpec spec = SequenceConfig({1, -1});
  spec.inputs[2].dims = {1, -1};
  IoBinding b;
  const std::string m = Message(BindConfigToModel(spec, SequenceModel(), "model.om", &b));
  EXPECT_NE(
      m.find("input 'type': expected dims [1,2] (model.om dims [1,2]), got [1,-1]"),
      std::string::npos)
      << m;
}

TEST(ShapeGearsBinding, BatchingIsRefused)
{
  ModelConfigSpec spec = SequenceConfig({-1});
  spec.max_batch_size = 4;
  IoBinding b;
  const std::string m = Message(BindConfigToModel(spec, SequenceModel(), "model.om", &b));
  EXPECT_NE(
      m.find("which fix every dim (dim 0 included); expected max_batch_size 0, got 4"),
      std::string::npos)
      << m;
}

// CANN lists the inputs of atc --input_shape in its order, which need not be the
// model's: here --input_shape "mask:2,-1;ids:1,-1" for inputs (ids, mask).
TEST(ShapeGears, AGearListInAnotherOrderThanTheInputsIsBoundByTheirFixedDims)
{
  ModelIoDesc io;
  io.inputs = {Fp32("ids", {1, -1}), Fp32("mask", {2, -1}), Fp32("type", {1, 2})};
  ASSERT_EQ(
      Message(ApplyShapeGears(ShapeGearKind::kDims, {{2, 4, 1, 8}, {2, 6, 1, 16}}, &io)),
      "");
  EXPECT_EQ(io.shape_gears.input_dims[0][0], (std::vector<int64_t>{1, 8}));  // ids
  EXPECT_EQ(io.shape_gears.input_dims[0][1], (std::vector<int64_t>{2, 4}));  // mask
  EXPECT_EQ(
      io.shape_gears.input_dims[1][2], (std::vector<int64_t>{1, 2}));  // type, unlisted
  EXPECT_EQ(
      io.shape_gears.values[1], (std::vector<int64_t>{2, 6, 1, 16}));  // CANN's order
}

TEST(ShapeGears, AGearListThatFitsNoOrderOrSeveralButNotTheModelsIsRefused)
{
  ModelIoDesc none;
  none.inputs = {Fp32("x", {1, -1}), Fp32("y", {3, -1})};
  EXPECT_EQ(
      Message(ApplyShapeGears(ShapeGearKind::kDims, {{1, 8, 2, 8}}, &none)),
      "its dynamic dims gears [1,8,2,8] (atc --dynamic_dims) cannot be bound to its "
      "inputs "
      "x [1,-1], y [3,-1] (model order) in any order; CANN lists, per gear, the full "
      "dims "
      "of the inputs named in atc --input_shape in that order, without their names: "
      "compile it with --input_shape naming every input that has a -1");

  ModelIoDesc same_shape;  // (x, y) and (y, x) both fit: the model order is taken
  same_shape.inputs = {Fp32("x", {1, -1}), Fp32("y", {1, -1})};
  ASSERT_EQ(
      Message(ApplyShapeGears(ShapeGearKind::kDims, {{1, 8, 1, 16}}, &same_shape)), "");
  EXPECT_EQ(same_shape.shape_gears.input_dims[0][0], (std::vector<int64_t>{1, 8}));

  ModelIoDesc ambiguous;  // a static z must come first; x and y fit either way after it
  ambiguous.inputs = {Fp32("x", {1, -1}), Fp32("y", {1, -1}), Fp32("z", {5})};
  EXPECT_EQ(
      Message(ApplyShapeGears(ShapeGearKind::kDims, {{5, 1, 8, 1, 16}}, &ambiguous)),
      "its dynamic dims gears [5,1,8,1,16] (atc --dynamic_dims) can be bound to its "
      "inputs "
      "in more than one order with different shapes (z [5], x [1,-1], y [1,-1]; or z "
      "[5], "
      "y [1,-1], x [1,-1]), none of them the model order x [1,-1], y [1,-1], z [5]; CANN "
      "lists, per gear, the full dims of the inputs named in atc --input_shape in that "
      "order, without their names: compile it with --input_shape listing the inputs in "
      "model order");
}
