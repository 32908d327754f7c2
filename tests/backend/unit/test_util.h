#pragma once

#include <gtest/gtest.h>

#include <string>

#include "json.h"
#include "npu_ge/triton_api.h"

namespace npu_ge_test {

// Takes ownership of 'err'; returns its message ("" for success).
inline std::string
Message(TRITONSERVER_Error* err)
{
  if (err == nullptr) return "";
  std::string m = TRITONSERVER_ErrorMessage(err);
  TRITONSERVER_ErrorDelete(err);
  return m;
}

inline npu_ge::JsonValue
Json(const std::string& text)
{
  npu_ge::JsonValue v;
  std::string error;
  EXPECT_TRUE(npu_ge::JsonValue::Parse(text, &v, &error)) << error;
  return v;
}

}  // namespace npu_ge_test
