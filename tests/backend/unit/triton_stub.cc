// Host-side stand-ins for the few TRITONSERVER_* functions the pure logic
// calls (errors, logging), so unit tests run without a tritonserver.
#include <string>

#include "npu_ge/triton_api.h"

struct TRITONSERVER_Error {
  TRITONSERVER_Error_Code code;
  std::string message;
};

extern "C" {

TRITONSERVER_Error*
TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char* msg)
{
  return new TRITONSERVER_Error{code, msg};
}
void
TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error)
{
  delete error;
}
TRITONSERVER_Error_Code
TRITONSERVER_ErrorCode(TRITONSERVER_Error* error)
{
  return error->code;
}
const char*
TRITONSERVER_ErrorCodeString(TRITONSERVER_Error*)
{
  return "stub";
}
const char*
TRITONSERVER_ErrorMessage(TRITONSERVER_Error* error)
{
  return error->message.c_str();
}
bool
TRITONSERVER_LogIsEnabled(TRITONSERVER_LogLevel)
{
  return false;
}
TRITONSERVER_Error*
TRITONSERVER_LogMessage(TRITONSERVER_LogLevel, const char*, const int, const char*)
{
  return nullptr;
}
TRITONSERVER_Error*
TRITONSERVER_MessageSerializeToJson(TRITONSERVER_Message*, const char**, size_t*)
{
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "stub");
}
TRITONSERVER_Error*
TRITONSERVER_MessageDelete(TRITONSERVER_Message*)
{
  return nullptr;
}

}  // extern "C"
