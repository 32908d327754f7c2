// Data type facts shared by the Triton and ACL sides. Pure functions.
#pragma once

#include <cstddef>
#include <string>

#include "acl/acl_base.h"
#include "npu_ge/triton_api.h"

namespace npu_ge {

// "TYPE_FP32" (model config spelling) -> TRITONSERVER_TYPE_FP32.
bool DataTypeFromConfig(const std::string& text, TRITONSERVER_DataType* dtype);
// TRITONSERVER_TYPE_FP32 -> "FP32" (the spelling in requests and messages).
const char* DataTypeName(TRITONSERVER_DataType dtype);
// Size of one element; 0 for BYTES and INVALID (no fixed size).
size_t DataTypeByteSize(TRITONSERVER_DataType dtype);

// Triton <-> ACL. BYTES has no ACL counterpart usable by .om models.
bool TritonToAclDataType(TRITONSERVER_DataType dtype, aclDataType* acl);
bool AclToTritonDataType(aclDataType acl, TRITONSERVER_DataType* dtype);
std::string AclDataTypeName(aclDataType acl);

}  // namespace npu_ge
