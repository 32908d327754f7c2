// The real GePort over CANN's GE online graph API. Built only with the CANN
// toolkit (NPU_GE_WITH_GE_GRAPH=ON). The torch-npu wheel used by development
// builds has ge/ and graph/ but not parser/onnx_parser.h: `make test`
// compile-checks this file (-fsyntax-only) against the wheel's headers with
// that one declaration taken from tests/cann_api/ge_api_decls.h, which
// defines CANN's own include guard. It is not run by the test suite; its
// logic lives in ge_graph_engine.cc and onnx_info.cc.
#include <cstring>
#include <mutex>

#include "acl/acl_rt.h"
#include "dtype.h"
#include "ge/ge_api.h"
#include "ge_port.h"
#include "graph/graph.h"
#include "graph/tensor.h"
#ifndef INC_EXTERNAL_PARSER_ONNX_PARSER_H_  // declared already in the syntax check
#include "parser/onnx_parser.h"
#endif
#include "triton_utils.h"

namespace npu_ge {
namespace {

std::map<ge::AscendString, ge::AscendString>
ToGe(const GeOptions& options)
{
  std::map<ge::AscendString, ge::AscendString> out;
  for (const auto& kv : options) out[kv.first.c_str()] = kv.second.c_str();
  return out;
}

TRITONSERVER_Error*
GeError(const char* call, uint32_t status)
{
  return NPU_GE_ERROR(
      INTERNAL, call << " failed: GE status " << status << ": " << ge::GEGetErrorMsg());
}

// A host tensor with the compiled shape and data type (ge::DataType uses the
// aclDataType codes).
TRITONSERVER_Error*
MakeTensor(const GeTensorSpec& spec, const void* data, ge::Tensor* tensor)
{
  aclDataType acl = ACL_DT_UNDEFINED;
  if (!TritonToAclDataType(spec.dtype, &acl)) {
    return NPU_GE_ERROR(
        UNSUPPORTED, "input '" << spec.name << "': data type " << DataTypeName(spec.dtype)
                               << " has no GE counterpart");
  }
  ge::TensorDesc desc(
      ge::Shape(spec.dims), ge::FORMAT_ND, static_cast<ge::DataType>(acl));
  desc.SetName(spec.name.c_str());
  if (tensor->SetTensorDesc(desc) != ge::GRAPH_SUCCESS) {
    return NPU_GE_ERROR(
        INTERNAL, "ge::Tensor::SetTensorDesc failed for '" << spec.name << "'");
  }
  const size_t bytes = spec.ByteSize();
  if (data != nullptr &&
      tensor->SetData(static_cast<const uint8_t*>(data), bytes) != ge::GRAPH_SUCCESS) {
    return NPU_GE_ERROR(INTERNAL, "ge::Tensor::SetData failed for '" << spec.name << "'");
  }
  return nullptr;
}

// Free device memory (HBM) on the current device; false if ACL cannot tell.
bool
FreeDeviceBytes(size_t* free_bytes)
{
  size_t total = 0;
  return aclrtGetMemInfo(ACL_HBM_MEM, free_bytes, &total) == ACL_SUCCESS;
}

// One instance's session and compiled graph; holds a reference on its
// device (aclrtSetDevice, for aclrtGetMemInfo) until it goes.
struct OpenGraph {
  std::unique_ptr<ge::Session> session;
  GeGraphIo io;
  int32_t device = 0;
  bool device_set = false;
  ~OpenGraph()
  {
    session.reset();  // ~Session releases the graph and its memory
    if (device_set) aclrtResetDevice(device);
  }
};

class CannGePort : public GePort {
 public:
  TRITONSERVER_Error* Initialize(const GeOptions& global) override
  {
    const uint32_t st = ge::GEInitialize(ToGe(global));
    return st == ge::SUCCESS ? nullptr : GeError("ge::GEInitialize", st);
  }

  TRITONSERVER_Error* OpenSession(
      const std::string& path, const GeOptions& session, const GeOptions& graph_options,
      const GeGraphIo& io, int32_t device, uint64_t* session_id,
      size_t* device_bytes) override
  {
    ge::Graph graph("npu_ge");
    std::map<ge::AscendString, ge::AscendString> parser_params;
    uint32_t st = ge::aclgrphParseONNX(path.c_str(), parser_params, graph);
    if (st != ge::SUCCESS) return GeError("ge::aclgrphParseONNX", st);
    std::unique_ptr<OpenGraph> g(new OpenGraph());
    g->io = io;
    g->device = device;
    g->session.reset(new ge::Session(ToGe(session)));
    st = g->session->AddGraph(kGraphId, graph, ToGe(graph_options));
    if (st != ge::SUCCESS) return GeError("ge::Session::AddGraph", st);
    // Compile now, at load, for the shapes the graph will run with.
    std::vector<ge::Tensor> shapes(io.inputs.size());
    for (size_t i = 0; i < io.inputs.size(); ++i) {
      NPU_GE_RETURN_IF_ERROR(MakeTensor(io.inputs[i], nullptr, &shapes[i]));
    }
    size_t free_before = 0, free_after = 0;
    g->device_set = aclrtSetDevice(device) == ACL_SUCCESS;  // returned by ~OpenGraph
    const bool measured = g->device_set && FreeDeviceBytes(&free_before);
    st = g->session->BuildGraph(kGraphId, shapes);
    if (st != ge::SUCCESS) return GeError("ge::Session::BuildGraph", st);
    *device_bytes = measured && FreeDeviceBytes(&free_after) && free_before > free_after
                        ? free_before - free_after
                        : 0;
    std::lock_guard<std::mutex> lock(mu_);
    *session_id = next_id_++;
    graphs_[*session_id] = std::move(g);
    return nullptr;
  }

  // ge::Session::RunGraphAsync (CANN 8.0.RC2 … 9.1 Ascend Graph API
  // reference): GE copies the host inputs into its queue and calls back with
  // the outputs, which carry the shapes this run produced.
  TRITONSERVER_Error* RunAsync(
      uint64_t session_id, const std::vector<GeRunInput>& inputs, GeRunDone done) override
  {
    OpenGraph* g = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      g = graphs_.at(session_id).get();
    }
    std::vector<ge::Tensor> in(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      GeTensorSpec spec = g->io.inputs[i];
      spec.dims = inputs[i].dims;  // the rows of this run for a dynamic batch
      NPU_GE_RETURN_IF_ERROR(MakeTensor(spec, inputs[i].data, &in[i]));
    }
    const uint32_t st = g->session->RunGraphAsync(
        kGraphId, in, [done](ge::Status status, std::vector<ge::Tensor>& out) {
          if (status != ge::SUCCESS) {
            done(GeError("ge::Session::RunGraphAsync (completion)", status), {});
            return;
          }
          std::vector<GeRunOutput> outputs(out.size());
          for (size_t i = 0; i < out.size(); ++i) {
            outputs[i].data = out[i].GetData();
            outputs[i].bytes = out[i].GetSize();
            outputs[i].dims = out[i].GetTensorDesc().GetShape().GetDims();
          }
          done(nullptr, outputs);
        });
    return st == ge::SUCCESS ? nullptr : GeError("ge::Session::RunGraphAsync", st);
  }

  void Finalize() override
  {
    const uint32_t st = ge::GEFinalize();
    if (st != ge::SUCCESS) LogAndDelete(GeError("ge::GEFinalize", st), "GE shutdown");
  }

  void CloseSession(uint64_t session_id) override
  {
    std::unique_ptr<OpenGraph> g;  // destroyed outside the lock
    std::lock_guard<std::mutex> lock(mu_);
    auto it = graphs_.find(session_id);
    if (it == graphs_.end()) return;
    g = std::move(it->second);
    graphs_.erase(it);
  }

 private:
  static constexpr uint32_t kGraphId = 1;
  std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<OpenGraph>> graphs_;
};

}  // namespace

std::unique_ptr<GePort>
NewCannGePort()
{
  return std::unique_ptr<GePort>(new CannGePort());
}

}  // namespace npu_ge
