package chattts

import (
	"fmt"
	"runtime"
	"strconv"

	"golang.org/x/sys/cpu"

	"github.com/parley-voice/parley/gpu"
)

// Precision choices for the GPT's weights (Config.Precision, tts.precision).
const (
	PrecisionAuto = "auto" // int8 when the export has it and the session runs on a CPU that runs it well
	PrecisionFP32 = "fp32"
	PrecisionInt8 = "int8"
)

// Int8File is the files key of an export's int8 GPT (train/chattts/export.py --int8): the same
// graph with every weight MatMul dynamically quantized, per output column, symmetric.
const Int8File = "gpt_int8"

// int8CPU reports whether this CPU runs ONNX Runtime's int8 MatMul kernels on weights of the
// given bits well, and why not. x86 needs AVX2 (below it the int8 kernels are slower than
// fp32); full 8-bit weights also need VNNI, because AVX2 sums uint8×int8 products in int16
// pairs, which saturate unless the weights keep to 7 bits (the exporter's default).
func int8CPU(bits int) (bool, string) {
	return int8CPUFor(runtime.GOARCH, x86Features{avx2: cpu.X86.HasAVX2, vnni: cpu.X86.HasAVX512VNNI || cpu.X86.HasAVXVNNI}, bits)
}

type x86Features struct{ avx2, vnni bool }

func int8CPUFor(arch string, x86 x86Features, bits int) (bool, string) {
	switch arch {
	case "amd64", "386":
		if !x86.avx2 {
			return false, "this CPU has no AVX2, on which ONNX Runtime's int8 kernels are slower than fp32"
		}
		if bits > 7 && !x86.vnni {
			return false, "the int8 GPT has full 8-bit weights, whose products saturate on a CPU without VNNI (export with 7-bit weights, the default)"
		}
		return true, ""
	case "arm64":
		return true, ""
	}
	return false, fmt.Sprintf("no int8 kernels are known to pay off on %s", arch)
}

// pickGPT decides which GPT graph to open for the configured precision: the part name
// ("gpt" or Int8File), the precision it runs at and, when that is not what was asked for,
// why (logged). For the int8 graph it also returns what it read of the file, so the session
// opens without reading it again.
func (e *Engine) pickGPT() (part, precision, why string, info *gpu.ModelInfo, err error) {
	want := e.cfg.Precision
	_, has := e.files[Int8File]
	switch want {
	case PrecisionFP32:
		return "gpt", PrecisionFP32, "", nil, nil
	case PrecisionInt8:
		if !has {
			return "", "", "", nil, fmt.Errorf("%w: %s has no int8 GPT (files.%s in %s); export it with python3 -m train.chattts.export --int8, or use precision fp32",
				ErrModel, e.dir, Int8File, ConfigFile)
		}
	case PrecisionAuto:
		if !has {
			return "gpt", PrecisionFP32, "", nil, nil
		}
		plan, err := gpu.PlanFor(e.cfg.GPU)
		if err != nil {
			return "", "", "", nil, err
		}
		if plan.Use.Kind != gpu.ProviderCPU {
			return "gpt", PrecisionFP32, "", nil, nil // fp32 on a GPU: the int8 graph is a CPU speed-up
		}
	}
	info, err = gpu.Inspect(e.files[Int8File])
	if err != nil {
		return "", "", "", nil, err
	}
	n, err := info.QuantizedMatMuls()
	if err != nil {
		return "", "", "", nil, err
	}
	if n == 0 {
		return "", "", "", nil, fmt.Errorf("%w: %s (files.%s) has no quantized MatMul", ErrModel, info.Path, Int8File)
	}
	bits := 8
	if s, ok := info.Meta("quantization_bits"); ok {
		if bits, err = strconv.Atoi(s); err != nil || bits < 2 || bits > 8 {
			return "", "", "", nil, fmt.Errorf("%w: %s: metadata quantization_bits %q", ErrModel, info.Path, s)
		}
	}
	if ok, reason := int8CPU(bits); !ok {
		return "gpt", PrecisionFP32, reason, nil, nil
	}
	return Int8File, PrecisionInt8, "", info, nil
}
