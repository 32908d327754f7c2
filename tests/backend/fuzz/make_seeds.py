"""Writes the seed corpus of the ONNX reader's fuzzer (corpus/*.onnx): models serialized by
onnx's own Python package, the way exporters write them (opset imports, producer, doc strings,
initializers with raw data, initializers also listed as inputs, subgraphs, external data
references, non-tensor types). Run once by hand where `pip install onnx` is possible:
    python tests/backend/fuzz/make_seeds.py
The files are committed; the tests never need onnx itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).parent / "corpus"


def save(name: str, graph: onnx.GraphProto, **kwargs: object) -> None:
    model = helper.make_model(graph, producer_name="npu_ge-seeds",
                              opset_imports=[helper.make_opsetid("", 13)], **kwargs)
    model.doc_string = f"seed {name}"
    (OUT / f"{name}.onnx").write_bytes(model.SerializeToString())


def main() -> None:
    OUT.mkdir(exist_ok=True)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    # y = x * w + 1, symbolic batch, weights as an initializer
    one = numpy_helper.from_array(np.ones(4, dtype=np.float32), "one")
    save("affine_symbolic_batch", helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "one"], ["y"])],
        "affine", [x], [y], [w, one]))
    # IR 3 style: initializers listed among the inputs too
    w_in = helper.make_tensor_value_info("w", TensorProto.FLOAT, [4])
    save("initializer_as_input", helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["y"])], "ir3", [x, w_in], [y], [w]), ir_version=3)
    # several inputs and outputs, several data types, fixed and symbolic dims
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    flag = helper.make_tensor_value_info("flag", TensorProto.BOOL, [1])
    half = helper.make_tensor_value_info("logits", TensorProto.FLOAT16, ["batch", "seq", 2])
    pooled = helper.make_tensor_value_info("pooled", TensorProto.BFLOAT16, ["batch", 2])
    save("bert_like_dtypes", helper.make_graph(
        [helper.make_node("Identity", ["input_ids"], ["logits"]),
         helper.make_node("Identity", ["attention_mask"], ["pooled"])],
        "bert", [ids, mask, flag], [half, pooled]))
    # an image model, NCHW, fixed batch, 4 KiB of weights
    img = helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 224, 224])
    out = helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 1000])
    big = numpy_helper.from_array(np.random.default_rng(0).random((16, 64), dtype=np.float32), "fc")
    save("image_fixed_batch_weights", helper.make_graph(
        [helper.make_node("Flatten", ["images"], ["output0"])], "image", [img], [out], [big]))
    # a subgraph (If) and a STRING input: types npu_ge refuses, still read
    text = helper.make_tensor_value_info("text", TensorProto.STRING, [1])
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    branch_out = helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])
    then = helper.make_graph([helper.make_node("Constant", [], ["b"], value=one)], "then", [], [branch_out])
    other = helper.make_graph([helper.make_node("Constant", [], ["b"], value=w)], "else", [], [branch_out])
    save("if_subgraph_string", helper.make_graph(
        [helper.make_node("If", ["cond"], ["r"], then_branch=then, else_branch=other)], "if",
        [cond, text], [helper.make_tensor_value_info("r", TensorProto.FLOAT, [4])]))
    # a sequence-typed output and an input without a shape
    seq = helper.make_tensor_sequence_value_info("parts", TensorProto.FLOAT, None)
    shapeless = helper.make_tensor_value_info("any", TensorProto.FLOAT, None)
    save("sequence_and_shapeless", helper.make_graph(
        [helper.make_node("SplitToSequence", ["any"], ["parts"])], "seq", [shapeless], [seq]))
    # weights in an external file (only the reference is in the model)
    ext = numpy_helper.from_array(np.zeros(4, dtype=np.float32), "ext")
    onnx.external_data_helper.set_external_data(ext, location="weights.bin", length=16)
    ext.ClearField("raw_data")
    ext.data_location = TensorProto.EXTERNAL
    save("external_data", helper.make_graph(
        [helper.make_node("Add", ["x", "ext"], ["y"])], "ext", [x], [y], [ext]))
    # metadata, value_info, denotations
    model_x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    model_x.type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "meta", [model_x], [y],
                              value_info=[helper.make_tensor_value_info("t", TensorProto.FLOAT, ["N", 4])])
    save("metadata_denotation", graph)
    model = onnx.load_from_string((OUT / "metadata_denotation.onnx").read_bytes())
    helper.set_model_props(model, {"author": "npu_ge", "license": "none"})
    (OUT / "metadata_denotation.onnx").write_bytes(model.SerializeToString())
    for path in sorted(OUT.glob("*.onnx")):
        if path.stem not in ("external_data", "sequence_and_shapeless"):  # weights.bin; no shape
            onnx.checker.check_model(onnx.load(path, load_external_data=False), full_check=False)
        print(path.name, path.stat().st_size)


if __name__ == "__main__":
    main()
