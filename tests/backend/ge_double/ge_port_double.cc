// TEST DOUBLE of the GE port (src/ge_port_cann.cc), for the real-tritonserver
// tests only: build.sh --ge-double links it instead of CANN's GE, so engine
// ge_graph (ONNX) can be loaded here without the CANN toolkit. It is never part
// of a product build. It "compiles" nothing; RunAsync copies the inputs (as
// GE's RunGraphAsync does), and a thread of the run computes y = 2x + 1 for
// every FP32 output shaped like the first (FP32) input, zeros otherwise, with
// the run's own batch rows in a dynamic batch dim, then calls back. A run
// whose first input element equals $NPU_GE_GE_DOUBLE_HANG_ON_VALUE does not
// call back for $NPU_GE_GE_DOUBLE_HANG_MS ms (default 4000; a hung device).
// Closing a session with a run still going (2 s after the call) is refused
// loudly: it aborts the process, as GE would be left running into freed memory. What the
// engine asked for is written as JSON to $NPU_GE_GE_DOUBLE_STATE_FILE:
// {"initialize": [{options}...], "sessions": [{options}...], "compiled": N,
//  "closed": [ids], "run_dims": [[dims of input 0]...] (the last 64 runs),
//  "late": L, "finalized": F, "acl_initialized_at_finalize": "true"|"false"|"unknown"}:
// L counts runs that called back after the hang; F counts GEFinalize calls; the
// last field is what the ACL double's state file ($NPU_GE_DOUBLE_STATE_FILE)
// said at that moment (GE must go before ACL).
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <thread>
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
  TRITONSERVER_Error* RunAsync(
      uint64_t id, const std::vector<GeRunInput>& inputs, GeRunDone done) override
  {
    std::lock_guard<std::mutex> lock(mu_);
    const GeGraphIo& io = ios_.at(id);
    if (inputs.size() != io.inputs.size()) {
      return TRITONSERVER_ErrorNew(
          TRITONSERVER_ERROR_INTERNAL, "GE double: wrong number of inputs");
    }
    // Copied now, as GE copies the inputs of RunGraphAsync into its queue.
    std::vector<std::vector<uint8_t>> copies;
    std::vector<std::vector<int64_t>> dims;
    for (size_t i = 0; i < inputs.size(); ++i) {
      GeTensorSpec spec = io.inputs[i];
      spec.dims = inputs[i].dims;
      const auto* p = static_cast<const uint8_t*>(inputs[i].data);
      copies.emplace_back(p, p + spec.ByteSize());
      dims.push_back(inputs[i].dims);
    }
    run_dims_.push_back(dims.at(0));
    if (run_dims_.size() > 64) run_dims_.erase(run_dims_.begin());
    Save();
    ++running_[id];
    ++total_running_;
    std::thread([this, id, io, copies, dims, done] {
      Compute(id, io, copies, dims, done);
    }).detach();
    return nullptr;
  }
  void CloseSession(uint64_t id) override
  {
    std::unique_lock<std::mutex> lock(mu_);
    // A run that has just called back may still be leaving its thread.
    idle_.wait_for(lock, std::chrono::seconds(2), [&] { return running_[id] == 0; });
    if (running_[id] != 0) {
      std::fprintf(
          stderr, "GE double: CloseSession(%llu) while a run of it is going\n",
          static_cast<unsigned long long>(id));
      std::abort();
    }
    closed_.push_back(id);
    Save();
  }
  ~DoubleGePort() override
  {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [this] { return total_running_ == 0; });
  }
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
  void Compute(
      uint64_t id, const GeGraphIo& io, const std::vector<std::vector<uint8_t>>& in,
      const std::vector<std::vector<int64_t>>& dims, const GeRunDone& done)
  {
    const GeTensorSpec& x0 = io.inputs.at(0);
    bool late = false;
    const char* hang = std::getenv("NPU_GE_GE_DOUBLE_HANG_ON_VALUE");
    if (hang != nullptr && *hang != '\0' && x0.dtype == TRITONSERVER_TYPE_FP32 &&
        in[0].size() >= sizeof(float)) {
      float first = 0;
      std::memcpy(&first, in[0].data(), sizeof(float));
      if (first == std::strtof(hang, nullptr)) {
        const char* ms = std::getenv("NPU_GE_GE_DOUBLE_HANG_MS");
        std::this_thread::sleep_for(
            std::chrono::milliseconds(
                ms != nullptr && *ms != '\0' ? std::atoll(ms) : 4000));
        late = true;
      }
    }
    GeTensorSpec x = x0;
    x.dims = dims[0];
    std::vector<std::vector<uint8_t>> out;
    std::vector<GeRunOutput> outputs;
    for (const GeTensorSpec& spec : io.outputs) {
      GeTensorSpec y = spec;
      if (!y.dims.empty() && y.dims[0] < 0 && !x.dims.empty()) y.dims[0] = x.dims[0];
      out.emplace_back(y.ByteSize(), 0);
      if (y.dtype == TRITONSERVER_TYPE_FP32 && x.dtype == TRITONSERVER_TYPE_FP32 &&
          y.ByteSize() == x.ByteSize()) {
        const auto* a = reinterpret_cast<const float*>(in[0].data());
        auto* b = reinterpret_cast<float*>(out.back().data());
        for (size_t k = 0; k < y.ByteSize() / sizeof(float); ++k) b[k] = 2 * a[k] + 1;
      }
      outputs.push_back({out.back().data(), out.back().size(), y.dims});
    }
    done(nullptr, outputs);
    std::lock_guard<std::mutex> lock(mu_);
    --running_[id];
    late_ += late ? 1 : 0;
    Save();
    --total_running_;
    idle_.notify_all();
  }
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
    s += "], \"closed\": [";
    for (size_t i = 0; i < closed_.size(); ++i) {
      s += (i ? ", " : "") + std::to_string(closed_[i]);
    }
    s += "], \"run_dims\": [";
    for (size_t i = 0; i < run_dims_.size(); ++i) {
      s += i ? ", [" : "[";
      for (size_t d = 0; d < run_dims_[i].size(); ++d) {
        s += (d ? ", " : "") + std::to_string(run_dims_[i][d]);
      }
      s += "]";
    }
    s += "], \"late\": " + std::to_string(late_);
    s += ", \"compiled\": " + std::to_string(ios_.size()) +
         ", \"finalized\": " + std::to_string(finalized_) +
         ", \"acl_initialized_at_finalize\": " + Quote(acl_at_finalize_) + "}\n";
    // Whole or not at all: a reader never sees a half-written file.
    const std::string tmp = std::string(path) + ".tmp";
    {
      std::ofstream(tmp) << s;
    }
    std::rename(tmp.c_str(), path);
  }
  std::mutex mu_;
  std::vector<GeOptions> inits_, sessions_;
  std::vector<GeGraphIo> ios_;
  std::map<uint64_t, int> running_;  // runs not yet called back, per session
  std::vector<uint64_t> closed_;
  std::vector<std::vector<int64_t>> run_dims_;
  std::condition_variable idle_;
  int total_running_ = 0;
  int late_ = 0;
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
