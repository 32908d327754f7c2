// libFuzzer target of the ONNX interface reader (backend_src/src/onnx_info.cc),
// the hand-written protobuf wire reader npu_ge keeps (backend_src/README.md says
// why). Built with clang under AddressSanitizer and UndefinedBehaviorSanitizer
// by tests/backend/test_onnx_fuzz.py, seeded with tests/backend/fuzz/corpus/
// (ONNX files written by onnx's own serializer, make_seeds.py). Besides the
// reader it runs what a load does next with what was read: the element count
// and byte size of every tensor, and its dims as text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "batching.h"
#include "dtype.h"
#include "model_config.h"
#include "onnx_info.h"

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  npu_ge::ModelIoDesc io;
  TRITONSERVER_Error* error = npu_ge::ReadOnnxIo(
      std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx", &io);
  if (error != nullptr) {
    TRITONSERVER_ErrorDelete(error);
    return 0;
  }
  for (const auto* list : {&io.inputs, &io.outputs}) {
    for (const npu_ge::ModelTensorDesc& t : *list) {
      npu_ge::TensorConfig cfg{t.name, t.dtype, t.dims};
      volatile size_t bytes = cfg.RowBytes();
      volatile size_t text = npu_ge::DimsToString(t.dims).size();
      (void)bytes;
      (void)text;
    }
  }
  return 0;
}
