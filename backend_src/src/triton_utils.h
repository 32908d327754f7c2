// Helpers around the Triton C API: error propagation, logging, RAII owners
// for Triton-owned objects. Everything fallible returns TRITONSERVER_Error*
// (nullptr on success); no C++ exception crosses the C boundary.
#pragma once

#include <memory>
#include <sstream>
#include <string>

#include "json.h"
#include "npu_ge/triton_api.h"

namespace npu_ge {

// Returns from the calling function when EXPR yields an error.
#define NPU_GE_RETURN_IF_ERROR(EXPR)                  \
  do {                                                \
    TRITONSERVER_Error* npu_ge_err__ = (EXPR);        \
    if (npu_ge_err__ != nullptr) return npu_ge_err__; \
  } while (false)

// Builds a message from stream pieces: NPU_GE_MSG("expected " << a).
#define NPU_GE_MSG(PIECES)   \
  ([&]() {                   \
    std::ostringstream os__; \
    os__ << PIECES;          \
    return os__.str();       \
  }())

#define NPU_GE_ERROR(CODE, PIECES) \
  TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_##CODE, NPU_GE_MSG(PIECES).c_str())

void LogMessage(
    TRITONSERVER_LogLevel level, const char* file, int line, const std::string& msg);

// Logging never throws (it is used on noexcept paths): a message that cannot
// be built (std::bad_alloc) is dropped.
#define NPU_GE_LOG(LEVEL, PIECES)                              \
  do {                                                         \
    if (TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_##LEVEL)) { \
      try {                                                    \
        ::npu_ge::LogMessage(                                  \
            TRITONSERVER_LOG_##LEVEL, __FILE__, __LINE__,      \
            NPU_GE_MSG("npu_ge: " << PIECES));                 \
      }                                                        \
      catch (...) {                                            \
      }                                                        \
    }                                                          \
  } while (false)

// Logs and deletes an error that cannot be propagated (e.g. in a finalizer).
void LogAndDelete(TRITONSERVER_Error* err, const char* what) noexcept;

// Copies an error so the same failure can be sent to several responses.
TRITONSERVER_Error* CopyError(TRITONSERVER_Error* err);

// Prefixes an error's message with context, keeping its code. Takes ownership.
TRITONSERVER_Error* WrapError(TRITONSERVER_Error* err, const std::string& ctx);

struct ErrorDeleter {
  void operator()(TRITONSERVER_Error* e) const { TRITONSERVER_ErrorDelete(e); }
};
using ErrorPtr = std::unique_ptr<TRITONSERVER_Error, ErrorDeleter>;

struct MessageDeleter {
  void operator()(TRITONSERVER_Message* m) const;
};
using MessagePtr = std::unique_ptr<TRITONSERVER_Message, MessageDeleter>;

// Serializes a Triton message (model or backend config) to a JSON string.
TRITONSERVER_Error* MessageToJson(TRITONSERVER_Message* msg, std::string* json);

// Serializes and parses a Triton message; 'what' names it in the error
// ("cannot parse the <what>: ...").
TRITONSERVER_Error* ParseMessage(
    TRITONSERVER_Message* msg, const char* what, JsonValue* value);

}  // namespace npu_ge
