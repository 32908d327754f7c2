// CANN GE APIs that backend_src/src/ge_port_cann.cc uses and the torch-npu
// 2.14.0 wheel's headers (build/cann-headers/.../include: acl/, ge/, graph/)
// lack. Used ONLY by the compile check of ge_port_cann.cc (`make test`:
// ctest npu_ge_ge_port_syntax and tests/backend/test_ge_port_syntax.py, both
// `-fsyntax-only -include tests/cann_api/ge_api_decls.h`). Real builds
// (NPU_GE_WITH_GE_GRAPH=ON) include the CANN toolkit's own header instead.
//
// Declared exactly as CANN documents it:
//   aclgrphParseONNX — "Parsing APIs", header parser/onnx_parser.h, library
//   libfmk_onnx_parser.so; prototype in the CANN 8.0.0 (commercial) Ascend
//   Graph API reference, page atlasgeapi_07_0005:
//     graphStatus aclgrphParseONNX(const char *model_file,
//         const std::map<ge::AscendString, ge::AscendString> &parser_params,
//         ge::Graph &graph);
//   (unchanged in the CANN 6.0.1, 8.1.RC1 and 9.0.0-beta pages of the same API).
//
// The include guard is CANN's own (INC_EXTERNAL_PARSER_ONNX_PARSER_H_), so
// ge_port_cann.cc skips `#include "parser/onnx_parser.h"` when this file was
// force-included. Session members the wheel lacks (CompileGraph, LoadGraph,
// GetCompiledGraphSummary: CANN 7.0+) cannot be declared outside their class
// and are therefore not used: the port compiles at load with
// Session::BuildGraph, which the wheel's ge/ge_api.h declares.
#ifndef INC_EXTERNAL_PARSER_ONNX_PARSER_H_
#define INC_EXTERNAL_PARSER_ONNX_PARSER_H_

#include <map>

#include "graph/ascend_string.h"
#include "graph/ge_error_codes.h"
#include "graph/graph.h"

namespace ge {
graphStatus aclgrphParseONNX(
    const char* model_file,
    const std::map<ge::AscendString, ge::AscendString>& parser_params, ge::Graph& graph);
}  // namespace ge

#endif  // INC_EXTERNAL_PARSER_ONNX_PARSER_H_
