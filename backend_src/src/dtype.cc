#include "dtype.h"

#include <cstring>

namespace npu_ge {
namespace {

struct DtypeRow {
  TRITONSERVER_DataType triton;
  const char* name;
  size_t size;
  aclDataType acl;
};

// One table drives every mapping so the directions cannot disagree.
constexpr DtypeRow kRows[] = {
    {TRITONSERVER_TYPE_BOOL, "BOOL", 1, ACL_BOOL},
    {TRITONSERVER_TYPE_UINT8, "UINT8", 1, ACL_UINT8},
    {TRITONSERVER_TYPE_UINT16, "UINT16", 2, ACL_UINT16},
    {TRITONSERVER_TYPE_UINT32, "UINT32", 4, ACL_UINT32},
    {TRITONSERVER_TYPE_UINT64, "UINT64", 8, ACL_UINT64},
    {TRITONSERVER_TYPE_INT8, "INT8", 1, ACL_INT8},
    {TRITONSERVER_TYPE_INT16, "INT16", 2, ACL_INT16},
    {TRITONSERVER_TYPE_INT32, "INT32", 4, ACL_INT32},
    {TRITONSERVER_TYPE_INT64, "INT64", 8, ACL_INT64},
    {TRITONSERVER_TYPE_FP16, "FP16", 2, ACL_FLOAT16},
    {TRITONSERVER_TYPE_FP32, "FP32", 4, ACL_FLOAT},
    {TRITONSERVER_TYPE_FP64, "FP64", 8, ACL_DOUBLE},
    {TRITONSERVER_TYPE_BF16, "BF16", 2, ACL_BF16},
    {TRITONSERVER_TYPE_BYTES, "BYTES", 0, ACL_STRING},
};

const DtypeRow*
FindTriton(TRITONSERVER_DataType dtype)
{
  for (const auto& row : kRows) {
    if (row.triton == dtype) return &row;
  }
  return nullptr;
}

}  // namespace

bool
DataTypeFromConfig(const std::string& text, TRITONSERVER_DataType* dtype)
{
  if (text.rfind("TYPE_", 0) != 0) return false;
  std::string name = text.substr(5);
  if (name == "STRING") name = "BYTES";  // config spelling of BYTES
  for (const auto& row : kRows) {
    if (name == row.name) {
      *dtype = row.triton;
      return true;
    }
  }
  return false;
}

const char*
DataTypeName(TRITONSERVER_DataType dtype)
{
  const DtypeRow* row = FindTriton(dtype);
  return row == nullptr ? "INVALID" : row->name;
}

size_t
DataTypeByteSize(TRITONSERVER_DataType dtype)
{
  const DtypeRow* row = FindTriton(dtype);
  return row == nullptr ? 0 : row->size;
}

bool
TritonToAclDataType(TRITONSERVER_DataType dtype, aclDataType* acl)
{
  const DtypeRow* row = FindTriton(dtype);
  if (row == nullptr || row->size == 0) return false;
  *acl = row->acl;
  return true;
}

bool
AclToTritonDataType(aclDataType acl, TRITONSERVER_DataType* dtype)
{
  for (const auto& row : kRows) {
    if (row.acl == acl && row.size != 0) {
      *dtype = row.triton;
      return true;
    }
  }
  return false;
}

std::string
AclDataTypeName(aclDataType acl)
{
  TRITONSERVER_DataType dtype;
  if (AclToTritonDataType(acl, &dtype)) return DataTypeName(dtype);
  if (acl == ACL_STRING) return "STRING";
  return "ACL dtype " + std::to_string(static_cast<int>(acl));
}

}  // namespace npu_ge
