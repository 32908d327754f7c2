"""Normalize UTF-8 text the way search and tokenizer front-ends do (NFKC + casefold).

Invalid UTF-8 in one request is answered with an error for that request only.
"""

import unicodedata

import numpy as np
import triton_python_backend_utils as pb_utils


def normalize(raw: bytes) -> str:
    text = unicodedata.normalize("NFKC", raw.decode("utf-8")).casefold()
    return " ".join(text.split())


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            texts = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().reshape(-1)
            try:
                normalized = [normalize(bytes(t)) for t in texts]
            except UnicodeDecodeError as exc:
                error = pb_utils.TritonError(f"TEXT is not valid UTF-8: {exc}")
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            out = np.array([n.encode() for n in normalized], dtype=np.object_).reshape(-1, 1)
            counts = np.array([len(n.split()) for n in normalized], dtype=np.int32).reshape(-1, 1)
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("NORMALIZED", out), pb_utils.Tensor("TOKEN_COUNT", counts)]
                )
            )
        return responses
