"""The model repository on disk: layout checks and config.pbtxt <-> ModelConfig protobuf."""
