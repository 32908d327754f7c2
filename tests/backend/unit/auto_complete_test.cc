#include "auto_complete.h"

#include "test_util.h"

using npu_ge::AutoCompleteConfig;
using npu_ge::ConfigNeedsAutoComplete;
using npu_ge::JsonValue;
using npu_ge::ModelIoDesc;
using npu_ge::ModelTensorDesc;

namespace {

ModelTensorDesc
Tensor(const std::string& name, TRITONSERVER_DataType dtype, std::vector<int64_t> dims)
{
  ModelTensorDesc t;
  t.name = name;
  t.dtype = dtype;
  t.dtype_name = "x";
  t.dims = std::move(dims);
  return t;
}

ModelIoDesc
GearModel()
{
  ModelIoDesc io;
  io.inputs = {Tensor("x", TRITONSERVER_TYPE_FP32, {-1, 4})};
  io.outputs = {
      Tensor("y", TRITONSERVER_TYPE_FP16, {-1, 4}),
      Tensor("s", TRITONSERVER_TYPE_BYTES, {-1, 1})};
  io.gears = {1, 8, 4};
  return io;
}

std::string
Complete(const std::string& config, const ModelIoDesc& io, std::string* summary)
{
  JsonValue completed;
  std::string error = npu_ge_test::Message(
      AutoCompleteConfig(npu_ge_test::Json(config), io, "model.om", &completed, summary));
  return error.empty() ? completed.Serialize() : "error: " + error;
}

}  // namespace

TEST(AutoComplete, NeededWhenInputsOrOutputsAreMissing)
{
  EXPECT_TRUE(ConfigNeedsAutoComplete(npu_ge_test::Json(R"({"name":"m"})")));
  EXPECT_TRUE(ConfigNeedsAutoComplete(npu_ge_test::Json(R"({"input":[],"output":[]})")));
  EXPECT_TRUE(ConfigNeedsAutoComplete(npu_ge_test::Json(R"({"input":[{"name":"x"}]})")));
  EXPECT_FALSE(ConfigNeedsAutoComplete(
      npu_ge_test::Json(R"({"input":[{"name":"x"}],"output":[{"name":"y"}]})")));
}

TEST(AutoComplete, FillsMaxBatchSizeFromTheLargestGearAndDropsTheBatchDim)
{
  std::string summary;
  EXPECT_EQ(
      Complete(
          R"({"name":"m","max_batch_size":0,"input":[],"output":[]})", GearModel(),
          &summary),
      R"({"input":[{"data_type":"TYPE_FP32","dims":[4],"name":"x"}],"max_batch_size":8,)"
      R"("name":"m","output":[{"data_type":"TYPE_FP16","dims":[4],"name":"y"},)"
      R"({"data_type":"TYPE_STRING","dims":[1],"name":"s"}]})");
  EXPECT_EQ(
      summary,
      "max_batch_size 8, input x FP32 [4], output y FP16 [4], output s BYTES [1]");
}

TEST(AutoComplete, KeepsDeclaredTensorsAndMaxBatchSize)
{
  std::string summary;
  EXPECT_EQ(
      Complete(
          R"({"max_batch_size":"2","input":[{"name":"x","keep":1}],"output":[]})",
          GearModel(), &summary),
      R"({"input":[{"keep":1,"name":"x"}],"max_batch_size":"2","output":[)"
      R"({"data_type":"TYPE_FP16","dims":[4],"name":"y"},)"
      R"({"data_type":"TYPE_STRING","dims":[1],"name":"s"}]})");
  EXPECT_EQ(summary, "output y FP16 [4], output s BYTES [1]");
}

TEST(AutoComplete, StaticModelKeepsFullDimsAndNoBatching)
{
  ModelIoDesc io;
  io.inputs = {Tensor("x", TRITONSERVER_TYPE_INT8, {2, 3})};
  io.outputs = {Tensor("y", TRITONSERVER_TYPE_INT8, {2, 3})};
  std::string summary;
  EXPECT_EQ(
      Complete(R"({})", io, &summary),
      R"({"input":[{"data_type":"TYPE_INT8","dims":[2,3],"name":"x"}],)"
      R"("output":[{"data_type":"TYPE_INT8","dims":[2,3],"name":"y"}]})");
}

TEST(AutoComplete, RefusesAModelDataTypeTritonLacks)
{
  ModelIoDesc io = GearModel();
  io.outputs[0].dtype_known = false;
  io.outputs[0].dtype_name = "ACL_COMPLEX64";
  std::string summary;
  EXPECT_EQ(
      Complete(R"({})", io, &summary),
      "error: cannot auto-complete output 'y': model.om data type ACL_COMPLEX64 has no "
      "Triton equivalent; declare the outputs in config.pbtxt");
}
