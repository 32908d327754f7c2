#include "onnx_info.h"

#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>

#include "batching.h"
#include "triton_utils.h"

namespace npu_ge {
namespace {

// Field numbers of onnx.proto (ONNX IR, stable since IR version 3).
constexpr uint32_t kModelGraph = 7;        // ModelProto.graph
constexpr uint32_t kGraphInitializer = 5;  // GraphProto.initializer (TensorProto)
constexpr uint32_t kGraphInput = 11;       // GraphProto.input (ValueInfoProto)
constexpr uint32_t kGraphOutput = 12;      // GraphProto.output
constexpr uint32_t kTensorName = 8;        // TensorProto.name
constexpr uint32_t kValueName = 1;         // ValueInfoProto.name
constexpr uint32_t kValueType = 2;         // ValueInfoProto.type (TypeProto)
constexpr uint32_t kTypeTensor = 1;        // TypeProto.tensor_type
constexpr uint32_t kTensorElemType = 1;    // TypeProto.Tensor.elem_type
constexpr uint32_t kTensorShape = 2;       // TypeProto.Tensor.shape
constexpr uint32_t kShapeDim = 1;          // TensorShapeProto.dim
constexpr uint32_t kDimValue = 1;          // Dimension.dim_value

// One field of a protobuf message: varint value or length-delimited bytes.
struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t varint = 0;
  std::string bytes;
};

class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  bool Done() const { return pos_ >= data_.size(); }
  bool Next(Field* f)
  {
    uint64_t key = 0;
    if (!Varint(&key)) return false;
    f->number = static_cast<uint32_t>(key >> 3);
    f->wire = static_cast<uint32_t>(key & 7);
    switch (f->wire) {
      case 0:
        return Varint(&f->varint);
      case 1:
        return Skip(8);
      case 2: {
        uint64_t n = 0;
        if (!Varint(&n) || n > data_.size() - pos_) return false;
        f->bytes = data_.substr(pos_, n);
        pos_ += n;
        return true;
      }
      case 5:
        return Skip(4);
      default:
        return false;  // groups (3/4) are not used by onnx.proto
    }
  }

 private:
  bool Varint(uint64_t* v)
  {
    *v = 0;
    for (int shift = 0; shift < 64 && pos_ < data_.size(); shift += 7) {
      const auto b = static_cast<uint8_t>(data_[pos_++]);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  bool Skip(size_t n)
  {
    if (n > data_.size() - pos_) return false;
    pos_ += n;
    return true;
  }
  const std::string& data_;
  size_t pos_ = 0;
};

// TensorProto.DataType -> Triton; false for types npu_ge cannot serve.
bool
OnnxToTriton(uint64_t elem, TRITONSERVER_DataType* dtype, std::string* name)
{
  struct Entry {
    uint64_t onnx;
    TRITONSERVER_DataType triton;
    const char* name;
  };
  static const Entry kTable[] = {
      {1, TRITONSERVER_TYPE_FP32, "FLOAT"},     {2, TRITONSERVER_TYPE_UINT8, "UINT8"},
      {3, TRITONSERVER_TYPE_INT8, "INT8"},      {4, TRITONSERVER_TYPE_UINT16, "UINT16"},
      {5, TRITONSERVER_TYPE_INT16, "INT16"},    {6, TRITONSERVER_TYPE_INT32, "INT32"},
      {7, TRITONSERVER_TYPE_INT64, "INT64"},    {8, TRITONSERVER_TYPE_INVALID, "STRING"},
      {9, TRITONSERVER_TYPE_BOOL, "BOOL"},      {10, TRITONSERVER_TYPE_FP16, "FLOAT16"},
      {11, TRITONSERVER_TYPE_FP64, "DOUBLE"},   {12, TRITONSERVER_TYPE_UINT32, "UINT32"},
      {13, TRITONSERVER_TYPE_UINT64, "UINT64"}, {16, TRITONSERVER_TYPE_BF16, "BFLOAT16"}};
  for (const Entry& e : kTable) {
    if (e.onnx == elem) {
      *dtype = e.triton;
      *name = e.name;
      return e.triton != TRITONSERVER_TYPE_INVALID;
    }
  }
  *name = "ONNX data type " + std::to_string(elem);
  return false;
}

bool
ReadShape(const std::string& bytes, std::vector<int64_t>* dims)
{
  Reader r(bytes);
  Field f;
  while (!r.Done()) {
    if (!r.Next(&f)) return false;
    if (f.number != kShapeDim || f.wire != 2) continue;
    int64_t dim = -1;  // dim_param (symbolic) or unset
    Reader d(f.bytes);
    Field g;
    while (!d.Done()) {
      if (!d.Next(&g)) return false;
      if (g.number == kDimValue && g.wire == 0) {  // int64 in onnx.proto; < 0 is unknown
        dim = g.varint > static_cast<uint64_t>(INT64_MAX)
                  ? -1
                  : static_cast<int64_t>(g.varint);
      }
    }
    dims->push_back(dim);
  }
  return true;
}

bool
ReadValueInfo(const std::string& bytes, ModelTensorDesc* t)
{
  Reader r(bytes);
  Field f;
  t->dtype_known = false;
  t->dtype_name = "no tensor type";
  while (!r.Done()) {
    if (!r.Next(&f)) return false;
    if (f.number == kValueName && f.wire == 2) t->name = f.bytes;
    if (f.number != kValueType || f.wire != 2) continue;
    Reader type(f.bytes);
    Field tf;
    while (!type.Done()) {
      if (!type.Next(&tf)) return false;
      if (tf.number != kTypeTensor || tf.wire != 2) continue;
      Reader tensor(tf.bytes);
      Field x;
      while (!tensor.Done()) {
        if (!tensor.Next(&x)) return false;
        if (x.number == kTensorElemType && x.wire == 0) {
          t->dtype_known = OnnxToTriton(x.varint, &t->dtype, &t->dtype_name);
        } else if (x.number == kTensorShape && x.wire == 2) {
          if (!ReadShape(x.bytes, &t->dims)) return false;
        }
      }
    }
  }
  return !t->name.empty();
}

}  // namespace

TRITONSERVER_Error*
ReadOnnxIo(const std::string& bytes, const std::string& label, ModelIoDesc* io)
{
  const auto malformed = [&]() {
    return NPU_GE_ERROR(
        INVALID_ARG, label << " is not an ONNX model (its protobuf cannot be read)");
  };
  Reader model(bytes);
  Field f;
  std::string graph;
  bool has_graph = false;
  while (!model.Done()) {
    if (!model.Next(&f)) return malformed();
    if (f.number == kModelGraph && f.wire == 2) {
      graph = std::move(f.bytes);
      has_graph = true;
    }
  }
  if (!has_graph) return malformed();
  std::set<std::string> initializers;
  std::vector<ModelTensorDesc> inputs, outputs;
  Reader g(graph);
  while (!g.Done()) {
    if (!g.Next(&f)) return malformed();
    if (f.wire != 2) continue;
    if (f.number == kGraphInitializer) {
      Reader t(f.bytes);
      Field tf;
      while (!t.Done()) {
        if (!t.Next(&tf)) return malformed();
        if (tf.number == kTensorName && tf.wire == 2) initializers.insert(tf.bytes);
      }
    } else if (f.number == kGraphInput || f.number == kGraphOutput) {
      ModelTensorDesc t;
      if (!ReadValueInfo(f.bytes, &t)) return malformed();
      (f.number == kGraphInput ? inputs : outputs).push_back(std::move(t));
    }
  }
  for (const auto* list : {&inputs, &outputs}) {
    for (const ModelTensorDesc& t : *list) {
      bool fixed = true;
      for (int64_t d : t.dims) fixed = fixed && d >= 0;
      if (fixed && ElementCount(t.dims) < 0) {  // overflowed
        return NPU_GE_ERROR(
            INVALID_ARG, label << ": tensor '" << t.name << "' has dims "
                               << DimsToString(t.dims)
                               << ", more elements than a 64-bit count holds");
      }
    }
  }
  ModelIoDesc out;
  for (ModelTensorDesc& t : inputs) {
    if (initializers.count(t.name) != 0) continue;  // a weight, not an input
    out.input_model_index.push_back(out.inputs.size());
    out.inputs.push_back(std::move(t));
  }
  out.outputs = std::move(outputs);
  if (out.inputs.empty() || out.outputs.empty()) {
    return NPU_GE_ERROR(
        INVALID_ARG, label << " declares " << out.inputs.size() << " input(s) and "
                           << out.outputs.size()
                           << " output(s); npu_ge needs at least one of each");
  }
  *io = std::move(out);
  return nullptr;
}

TRITONSERVER_Error*
ReadOnnxIoFile(const std::string& path, const std::string& label, ModelIoDesc* io)
{
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  if (!in || !(bytes << in.rdbuf())) {
    return NPU_GE_ERROR(NOT_FOUND, "cannot read " << label << " ('" << path << "')");
  }
  return ReadOnnxIo(bytes.str(), label, io);
}

}  // namespace npu_ge
