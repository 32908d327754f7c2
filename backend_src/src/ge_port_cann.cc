// The real GePort over CANN's GE online graph API. Built only with the CANN
// toolkit (NPU_GE_WITH_GE_GRAPH=ON): parser/onnx_parser.h and the libraries
// are not in the torch-npu wheel used by development builds, so this file is
// not exercised by the test suite; its logic lives in ge_graph_engine.cc.
#include <cstring>
#include <mutex>

#include "dtype.h"
#include "ge/ge_api.h"
#include "ge_port.h"
#include "graph/graph.h"
#include "parser/onnx_parser.h"
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

ModelTensorDesc
FromGe(const std::string& name, const ge::TensorDesc& desc)
{
  ModelTensorDesc t;
  t.name = name;
  const aclDataType acl = static_cast<aclDataType>(desc.GetDataType());  // same codes
  t.dtype_known = AclToTritonDataType(acl, &t.dtype);
  t.dtype_name = AclDataTypeName(acl);
  t.dims = desc.GetShape().GetDims();
  return t;
}

class CannGePort : public GePort {
 public:
  TRITONSERVER_Error* Initialize(const GeOptions& global) override
  {
    static std::once_flag once;
    static uint32_t status = ge::SUCCESS;
    std::call_once(once, [&] { status = ge::GEInitialize(ToGe(global)); });
    return status == ge::SUCCESS ? nullptr : GeError("ge::GEInitialize", status);
  }

  TRITONSERVER_Error* Parse(const std::string& path, ge::Graph* graph)
  {
    std::map<ge::AscendString, ge::AscendString> params;
    const uint32_t st = ge::aclgrphParseONNX(path.c_str(), params, *graph);
    return st == ge::SUCCESS ? nullptr : GeError("aclgrphParseONNX", st);
  }

  TRITONSERVER_Error* Describe(const std::string& path, ModelIoDesc* io) override
  {
    ge::Graph graph("npu_ge_describe");
    NPU_GE_RETURN_IF_ERROR(Parse(path, &graph));
    for (ge::GNode& node : graph.GetDirectNode()) {
      ge::AscendString type, name;
      node.GetType(type);
      node.GetName(name);
      if (std::strcmp(type.GetString(), "Data") == 0) {
        ge::TensorDesc desc;
        node.GetOutputDesc(0, desc);
        io->inputs.push_back(FromGe(name.GetString(), desc));
        io->input_model_index.push_back(io->inputs.size() - 1);
      } else if (std::strcmp(type.GetString(), "NetOutput") == 0) {
        for (size_t i = 0; i < node.GetInputsSize(); ++i) {
          ge::TensorDesc desc;
          node.GetInputDesc(static_cast<int32_t>(i), desc);
          ge::AscendString out_name;
          desc.GetName(out_name);
          io->outputs.push_back(FromGe(out_name.GetString(), desc));
        }
      }
    }
    return nullptr;
  }

  TRITONSERVER_Error* OpenSession(
      const std::string& path, const GeOptions& session, const GeOptions& graph_options,
      uint64_t* session_id) override
  {
    ge::Graph graph("npu_ge");
    NPU_GE_RETURN_IF_ERROR(Parse(path, &graph));
    std::unique_ptr<ge::Session> s(new ge::Session(ToGe(session)));
    const uint32_t st = s->AddGraph(kGraphId, graph, ToGe(graph_options));
    if (st != ge::SUCCESS) return GeError("ge::Session::AddGraph", st);
    std::lock_guard<std::mutex> lock(mu_);
    *session_id = next_id_++;
    sessions_[*session_id] = std::move(s);
    return nullptr;
  }

  TRITONSERVER_Error* Run(
      uint64_t session_id, const std::vector<const void*>& inputs,
      const std::vector<size_t>& input_bytes, const std::vector<void*>& outputs,
      const std::vector<size_t>& output_bytes) override
  {
    ge::Session* s = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      s = sessions_.at(session_id).get();
    }
    std::vector<ge::Tensor> in(inputs.size()), out;
    for (size_t i = 0; i < inputs.size(); ++i) {
      in[i].SetData(static_cast<const uint8_t*>(inputs[i]), input_bytes[i]);
    }
    const uint32_t st = s->RunGraph(kGraphId, in, out);
    if (st != ge::SUCCESS) return GeError("ge::Session::RunGraph", st);
    if (out.size() != outputs.size()) {
      return NPU_GE_ERROR(
          INTERNAL,
          "GE returned " << out.size() << " outputs, expected " << outputs.size());
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].GetSize() != output_bytes[i]) {
        return NPU_GE_ERROR(
            INTERNAL, "GE output " << i << ": expected " << output_bytes[i]
                                   << " bytes, got " << out[i].GetSize());
      }
      std::memcpy(outputs[i], out[i].GetData(), output_bytes[i]);
    }
    return nullptr;
  }

  void CloseSession(uint64_t session_id) override
  {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_.erase(session_id);  // ~Session releases the graph and its memory
  }

 private:
  static constexpr uint32_t kGraphId = 1;
  std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<ge::Session>> sessions_;
};

}  // namespace

std::unique_ptr<GePort>
NewCannGePort()
{
  return std::unique_ptr<GePort>(new CannGePort());
}

}  // namespace npu_ge
