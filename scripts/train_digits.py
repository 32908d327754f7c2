"""Regenerate the sample digits classifier's weights (packaged with geadmin).

Data: scikit-learn's bundled copy of the UCI "Optical Recognition of Handwritten Digits"
test set (1,797 8x8 images, 10 classes) — shipped inside the scikit-learn wheel, no download.
Model: a one-hidden-layer MLP (64 -> 32 ReLU -> 10 softmax) trained by scikit-learn, exported
as plain numpy arrays so the python-backend models need only numpy at serving time.

    .venv/bin/pip install -e '.[samples]' && .venv/bin/python scripts/train_digits.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

REPO = Path(__file__).resolve().parents[1] / "geadmin" / "samples" / "model_repository"


def main() -> None:
    digits = load_digits()
    # The dataset stores pixels as 0..16; the pipeline's input is an 8-bit image (0..255).
    images = digits.images.astype(np.float32) * (255.0 / 16.0)
    features = images.reshape(len(images), -1) / 255.0
    mean = features.mean(axis=0)
    std = features.std(axis=0) + 1e-6
    x = (features - mean) / std
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.25, random_state=0, stratify=digits.target
    )
    mlp = MLPClassifier(hidden_layer_sizes=(32,), max_iter=600, random_state=0)
    mlp.fit(x_train, y_train)
    print(f"held-out accuracy: {mlp.score(x_test, y_test):.4f} on {len(y_test)} images")

    np.savez(
        REPO / "digits_preprocess" / "1" / "scaler.npz",
        mean=mean.astype(np.float32),
        std=std.astype(np.float32),
    )
    np.savez(
        REPO / "digits_classifier" / "1" / "weights.npz",
        w1=mlp.coefs_[0].astype(np.float32),
        b1=mlp.intercepts_[0].astype(np.float32),
        w2=mlp.coefs_[1].astype(np.float32),
        b2=mlp.intercepts_[1].astype(np.float32),
    )
    # A few real images with their labels, for tests and the README's example request.
    pick = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    np.savez(
        REPO.parent / "digits_examples.npz",
        images=np.rint(images[pick]).astype(np.uint8),
        labels=digits.target[pick].astype(np.int32),
    )


if __name__ == "__main__":
    main()
