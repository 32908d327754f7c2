"""Test inference: one request to any model, and the same request as curl and Python.

- spec.py       what a model's inputs and outputs accept, and the checks a tensor passes
- inputs.py     request tensors from one source per input (random, zeros, JSON, .npy, image)
- npy.py        .npy uploads as tensors: the header's shape checked before numpy allocates
- images.py     images as tensors: decoded, resized, laid out as the config says, normalised
- request.py    prepare, build and send one request, timed by Triton's statistics
- outputs.py    a response's outputs read: plain values, table rows, top-k classes with labels
- snippets.py   the same request as a `curl` command and a `tritonclient` script
"""
