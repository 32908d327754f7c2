"""Running the stack: tritonserver and dashboard processes, the workspace, which Triton a command targets."""
