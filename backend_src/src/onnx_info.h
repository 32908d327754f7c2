// The inputs and outputs an ONNX model declares (names, data types, dims), read
// straight from its protobuf wire format: the ge_graph engine binds the model
// configuration to these ONNX names, whatever GE calls its nodes. Pure logic.
#pragma once

#include <string>

#include "model_config.h"

namespace npu_ge {

// Parses the bytes of an ONNX ModelProto: graph.input (minus initializers)
// and graph.output, in graph order. Symbolic or missing dims are -1.
// 'label' names the file in messages.
TRITONSERVER_Error* ReadOnnxIo(
    const std::string& bytes, const std::string& label, ModelIoDesc* io);

// Reads the file, then ReadOnnxIo.
TRITONSERVER_Error* ReadOnnxIoFile(
    const std::string& path, const std::string& label, ModelIoDesc* io);

}  // namespace npu_ge
