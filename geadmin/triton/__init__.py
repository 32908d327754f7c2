"""Talking to Triton: the client facade, its error translation, the known servers, its log."""
