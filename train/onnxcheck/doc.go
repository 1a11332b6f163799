// Package onnxcheck holds the export parity tests for the models that train/ produces:
// SenseVoice-format models (ONNX Runtime must reproduce PyTorch's logits, recorded by the
// exporter in reference.json, and carry complete sherpa-onnx metadata) and ChatTTS bundles
// (train/chattts/CONTRACT.md: GPT prefill and cached steps, identical greedy code sequences,
// decoder, Vocos and DVAE encoder outputs).
//
// Python has no onnxruntime on the build machines, so this check lives on the Go side. The
// package has no non-test code; train/ is otherwise never imported by Go.
package onnxcheck
