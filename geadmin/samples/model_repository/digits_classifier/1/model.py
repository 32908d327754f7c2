"""Forward pass of the trained MLP with numpy: softmax(relu(x W1 + b1) W2 + b2)."""

from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        weights = np.load(Path(__file__).with_name("weights.npz"))
        self.w1, self.b1 = weights["w1"], weights["b1"]
        self.w2, self.b2 = weights["w2"], weights["b2"]

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "features").as_numpy()
            hidden = np.maximum(x @ self.w1 + self.b1, 0.0)
            logits = hidden @ self.w2 + self.b2
            logits -= logits.max(axis=1, keepdims=True)
            exp = np.exp(logits)
            probabilities = (exp / exp.sum(axis=1, keepdims=True)).astype(np.float32)
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("probabilities", probabilities)])
            )
        return responses
