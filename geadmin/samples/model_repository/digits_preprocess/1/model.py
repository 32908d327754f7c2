"""Scale 8-bit pixels to [0, 1] and standardize with the training set's mean and std."""

from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        scaler = np.load(Path(__file__).with_name("scaler.npz"))
        self.mean = scaler["mean"]
        self.std = scaler["std"]

    def execute(self, requests):
        responses = []
        for request in requests:
            image = pb_utils.get_input_tensor_by_name(request, "image").as_numpy()
            flat = image.reshape(image.shape[0], -1).astype(np.float32) / 255.0
            features = ((flat - self.mean) / self.std).astype(np.float32)
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("features", features)])
            )
        return responses
