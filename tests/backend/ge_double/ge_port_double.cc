// TEST DOUBLE of the GE port (src/ge_port_cann.cc), for the real-tritonserver
// tests only: build.sh --ge-double links it instead of CANN's GE, so engine
// ge_graph (ONNX) can be loaded here without the CANN toolkit. It is never part
// of a product build. It "compiles" nothing; Run computes y = 2x + 1 for every
// FP32 output shaped like the first (FP32) input, zeros otherwise. What the
// engine asked for is written as JSON to $NPU_GE_GE_DOUBLE_STATE_FILE:
// {"initialize": [{options}...], "sessions": [{options}...], "compiled": N,
//  "finalized": F, "acl_initialized_at_finalize": "true"|"false"|"unknown"}: F
// counts GEFinalize calls; the last field is what the ACL double's state file
// ($NPU_GE_DOUBLE_STATE_FILE) said at that moment (GE must go before ACL).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <vector>

#include "ge_port.h"

namespace npu_ge {
namespace {

std::string
Quote(const std::string& s)
{
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string
ToJson(const GeOptions& options)
{
  std::string s = "{";
  for (const auto& kv : options) {
    s += (s.size() > 1 ? ", " : "") + Quote(kv.first) + ": " + Quote(kv.second);
  }
  return s + "}";
}

class DoubleGePort : public GePort {
 public:
  DoubleGePort()
  {
    std::fprintf(
        stderr, "npu_ge: GE port is the TEST DOUBLE (tests/backend/ge_double)\n");
  }
  TRITONSERVER_Error* Initialize(const GeOptions& global) override
  {
    std::lock_guard<std::mutex> lock(mu_);
    inits_.push_back(global);
    Save();
    return nullptr;
  }
  TRITONSERVER_Error* OpenSession(
      const std::string&, const GeOptions& session, const GeOptions&, const GeGraphIo& io,
      int32_t, uint64_t* id, size_t* device_bytes) override
  {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_.push_back(session);
    ios_.push_back(io);
    *device_bytes = 1 << 20;  // what the double pretends the compiled graph holds
    *id = ios_.size() - 1;
    Save();
    return nullptr;
  }
  TRITONSERVER_Error* Run(
      uint64_t id, const std::vector<const void*>& inputs,
      const std::vector<void*>& outputs) override
  {
    GeGraphIo io;
    {
      std::lock_guard<std::mutex> lock(mu_);
      io = ios_.at(id);
    }
    const GeTensorSpec& x = io.inputs.at(0);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const GeTensorSpec& y = io.outputs[i];
      std::memset(outputs[i], 0, y.ByteSize());
      if (y.dtype != TRITONSERVER_TYPE_FP32 || x.dtype != TRITONSERVER_TYPE_FP32 ||
          y.ByteSize() != x.ByteSize()) {
        continue;
      }
      const float* in = static_cast<const float*>(inputs[0]);
      float* out = static_cast<float*>(outputs[i]);
      for (size_t k = 0; k < y.ByteSize() / sizeof(float); ++k) out[k] = 2 * in[k] + 1;
    }
    return nullptr;
  }
  void CloseSession(uint64_t) override {}
  void Finalize() override
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++finalized_;
    acl_at_finalize_ = "unknown";
    const char* acl_state = std::getenv("NPU_GE_DOUBLE_STATE_FILE");
    if (acl_state != nullptr && *acl_state != '\0') {
      std::ifstream in(acl_state);
      const std::string text(
          (std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (text.find("\"initialized\": true") != std::string::npos) {
        acl_at_finalize_ = "true";
      } else if (text.find("\"initialized\": false") != std::string::npos) {
        acl_at_finalize_ = "false";
      }
    }
    Save();
  }

 private:
  void Save()
  {
    const char* path = std::getenv("NPU_GE_GE_DOUBLE_STATE_FILE");
    if (path == nullptr || *path == '\0') return;
    std::string s = "{\"initialize\": [";
    for (size_t i = 0; i < inits_.size(); ++i) s += (i ? ", " : "") + ToJson(inits_[i]);
    s += "], \"sessions\": [";
    for (size_t i = 0; i < sessions_.size(); ++i) {
      s += (i ? ", " : "") + ToJson(sessions_[i]);
    }
    s += "], \"compiled\": " + std::to_string(ios_.size()) +
         ", \"finalized\": " + std::to_string(finalized_) +
         ", \"acl_initialized_at_finalize\": " + Quote(acl_at_finalize_) + "}\n";
    std::ofstream(path) << s;
  }
  std::mutex mu_;
  std::vector<GeOptions> inits_, sessions_;
  std::vector<GeGraphIo> ios_;
  int finalized_ = 0;
  std::string acl_at_finalize_ = "unknown";
};

}  // namespace

std::unique_ptr<GePort>
NewCannGePort()
{
  return std::unique_ptr<GePort>(new DoubleGePort());
}

}  // namespace npu_ge
