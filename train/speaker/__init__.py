"""A speaker encoder in CAM++'s ONNX signature (80-bin Kaldi fbank in, 192-d embedding out)."""
