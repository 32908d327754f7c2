#include "triton_utils.h"

namespace npu_ge {

void
LogMessage(
    TRITONSERVER_LogLevel level, const char* file, int line, const std::string& msg)
{
  TRITONSERVER_Error* err = TRITONSERVER_LogMessage(level, file, line, msg.c_str());
  if (err != nullptr) {
    TRITONSERVER_ErrorDelete(err);
  }
}

void
LogAndDelete(TRITONSERVER_Error* err, const char* what) noexcept
{
  if (err == nullptr) {
    return;
  }
  NPU_GE_LOG(ERROR, what << ": " << TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
}

TRITONSERVER_Error*
CopyError(TRITONSERVER_Error* err)
{
  return TRITONSERVER_ErrorNew(
      TRITONSERVER_ErrorCode(err), TRITONSERVER_ErrorMessage(err));
}

TRITONSERVER_Error*
WrapError(TRITONSERVER_Error* err, const std::string& ctx)
{
  if (err == nullptr) {
    return nullptr;
  }
  TRITONSERVER_Error* wrapped = TRITONSERVER_ErrorNew(
      TRITONSERVER_ErrorCode(err), (ctx + ": " + TRITONSERVER_ErrorMessage(err)).c_str());
  TRITONSERVER_ErrorDelete(err);
  return wrapped;
}

void
MessageDeleter::operator()(TRITONSERVER_Message* m) const
{
  LogAndDelete(TRITONSERVER_MessageDelete(m), "failed to delete message");
}

TRITONSERVER_Error*
MessageToJson(TRITONSERVER_Message* msg, std::string* json)
{
  const char* base = nullptr;
  size_t size = 0;
  NPU_GE_RETURN_IF_ERROR(TRITONSERVER_MessageSerializeToJson(msg, &base, &size));
  json->assign(base, size);
  return nullptr;
}

TRITONSERVER_Error*
ParseMessage(TRITONSERVER_Message* msg, const char* what, JsonValue* value)
{
  std::string json;
  NPU_GE_RETURN_IF_ERROR(MessageToJson(msg, &json));
  std::string parse_error;
  if (!JsonValue::Parse(json, value, &parse_error)) {
    return NPU_GE_ERROR(INTERNAL, "cannot parse the " << what << ": " << parse_error);
  }
  return nullptr;
}

}  // namespace npu_ge
