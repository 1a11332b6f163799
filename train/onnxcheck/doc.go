// Package onnxcheck holds the export parity tests for the SenseVoice-format models that
// train/ produces: ONNX Runtime must reproduce PyTorch's logits (recorded by the exporter in
// reference.json) and every model must carry complete sherpa-onnx metadata.
//
// Python has no onnxruntime on the build machines, so this check lives on the Go side. The
// package has no non-test code; train/ is otherwise never imported by Go.
package onnxcheck
