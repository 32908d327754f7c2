#include "dtype.h"
#include "test_util.h"

using namespace npu_ge;

TEST(Dtype, EveryFixedSizeTypeRoundTripsThroughAcl)
{
  const TRITONSERVER_DataType types[] = {
      TRITONSERVER_TYPE_BOOL,   TRITONSERVER_TYPE_UINT8,  TRITONSERVER_TYPE_UINT16,
      TRITONSERVER_TYPE_UINT32, TRITONSERVER_TYPE_UINT64, TRITONSERVER_TYPE_INT8,
      TRITONSERVER_TYPE_INT16,  TRITONSERVER_TYPE_INT32,  TRITONSERVER_TYPE_INT64,
      TRITONSERVER_TYPE_FP16,   TRITONSERVER_TYPE_FP32,   TRITONSERVER_TYPE_FP64,
      TRITONSERVER_TYPE_BF16};
  for (TRITONSERVER_DataType t : types) {
    aclDataType acl;
    ASSERT_TRUE(TritonToAclDataType(t, &acl)) << DataTypeName(t);
    TRITONSERVER_DataType back;
    ASSERT_TRUE(AclToTritonDataType(acl, &back));
    EXPECT_EQ(back, t);
    EXPECT_GT(DataTypeByteSize(t), 0u);
  }
}

TEST(Dtype, KnownAclValues)
{
  aclDataType acl;
  ASSERT_TRUE(TritonToAclDataType(TRITONSERVER_TYPE_FP32, &acl));
  EXPECT_EQ(acl, ACL_FLOAT);
  ASSERT_TRUE(TritonToAclDataType(TRITONSERVER_TYPE_FP16, &acl));
  EXPECT_EQ(acl, ACL_FLOAT16);
  ASSERT_TRUE(TritonToAclDataType(TRITONSERVER_TYPE_BF16, &acl));
  EXPECT_EQ(acl, ACL_BF16);
  EXPECT_EQ(DataTypeByteSize(TRITONSERVER_TYPE_BF16), 2u);
  EXPECT_EQ(DataTypeByteSize(TRITONSERVER_TYPE_FP64), 8u);
}

TEST(Dtype, BytesHasNoAclMapping)
{
  aclDataType acl;
  EXPECT_FALSE(TritonToAclDataType(TRITONSERVER_TYPE_BYTES, &acl));
  TRITONSERVER_DataType t;
  EXPECT_FALSE(AclToTritonDataType(ACL_STRING, &t));
  EXPECT_EQ(DataTypeByteSize(TRITONSERVER_TYPE_BYTES), 0u);
  EXPECT_EQ(AclDataTypeName(static_cast<aclDataType>(99)), "ACL dtype 99");
}

TEST(Dtype, ConfigSpellings)
{
  TRITONSERVER_DataType t;
  ASSERT_TRUE(DataTypeFromConfig("TYPE_FP32", &t));
  EXPECT_EQ(t, TRITONSERVER_TYPE_FP32);
  ASSERT_TRUE(DataTypeFromConfig("TYPE_STRING", &t));
  EXPECT_EQ(t, TRITONSERVER_TYPE_BYTES);
  EXPECT_FALSE(DataTypeFromConfig("FP32", &t));
  EXPECT_FALSE(DataTypeFromConfig("TYPE_FP8", &t));
  EXPECT_STREQ(DataTypeName(TRITONSERVER_TYPE_INT64), "INT64");
}
