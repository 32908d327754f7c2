"""Arg-max of the class probabilities, with the digit's name as a BYTES output."""

import numpy as np
import triton_python_backend_utils as pb_utils

NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            p = pb_utils.get_input_tensor_by_name(request, "probabilities").as_numpy()
            label = p.argmax(axis=1).astype(np.int32)
            score = p[np.arange(len(label)), label].astype(np.float32)
            names = np.array([NAMES[i].encode() for i in label], dtype=np.object_)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("label", label.reshape(-1, 1)),
                        pb_utils.Tensor("score", score.reshape(-1, 1)),
                        pb_utils.Tensor("label_name", names.reshape(-1, 1)),
                    ]
                )
            )
        return responses
