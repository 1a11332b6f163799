package gpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseProvider(t *testing.T) {
	tests := []struct {
		in   string
		want string
		err  bool
	}{
		{"", "auto", false},
		{"auto", "auto", false},
		{"CPU", "cpu", false},
		{"cuda", "cuda:0", false},
		{"cuda:1", "cuda:1", false},
		{" tensorrt:2 ", "tensorrt:2", false},
		{"cuda:-1", "", true},
		{"cuda:x", "", true},
		{"cpu:0", "", true},
		{"rocm", "", true},
	}
	for _, tc := range tests {
		got, err := ParseProvider(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("ParseProvider(%q) error = %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if err == nil && got.String() != tc.want {
			t.Errorf("ParseProvider(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestPlanProviderFallback(t *testing.T) {
	withCUDA := t.TempDir()
	lib := filepath.Join(withCUDA, "libonnxruntime.so.1")
	if err := os.WriteFile(filepath.Join(withCUDA, "libonnxruntime_providers_cuda.so"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cpuOnlyLib := filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	oneGPU := GPUReport{Devices: []Device{{Index: 0, Name: "NVIDIA H100", MemoryTotal: 80 << 30}}}
	noGPU := GPUReport{Reason: "no NVIDIA driver (libnvidia-ml.so.1 not found)"}

	tests := []struct {
		name     string
		spec     string
		lib      string
		gpus     GPUReport
		use      string
		fallback string // substring of the reason; "" means no fallback
	}{
		{"cpu asked", "cpu", lib, oneGPU, "cpu", ""},
		{"auto with everything", "auto", lib, oneGPU, "cuda:0", ""},
		{"auto without gpu is plain cpu", "auto", lib, noGPU, "cpu", ""},
		{"auto without provider lib", "auto", cpuOnlyLib, oneGPU, "cpu", ""},
		{"cuda without driver", "cuda", lib, noGPU, "cpu", "libnvidia-ml"},
		{"cuda without provider lib", "cuda", cpuOnlyLib, oneGPU, "cpu", "libonnxruntime_providers_cuda.so"},
		{"cuda device out of range", "cuda:2", lib, oneGPU, "cpu", "GPU 2 requested but only 1"},
		{"cuda ok", "cuda:0", lib, oneGPU, "cuda:0", ""},
		{"tensorrt without its lib", "tensorrt", lib, oneGPU, "cpu", "libonnxruntime_providers_tensorrt.so"},
		{"driver present, no device", "cuda", lib, GPUReport{Reason: "NVIDIA driver present but no device found"}, "cpu", "no device"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := ParseProvider(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			p := PlanProvider(spec, tc.lib, tc.gpus)
			if p.Use.String() != tc.use {
				t.Errorf("use = %s, want %s (fallback %q)", p.Use, tc.use, p.Fallback)
			}
			if tc.fallback == "" && p.Fallback != "" {
				t.Errorf("unexpected fallback reason %q", p.Fallback)
			}
			if tc.fallback != "" && !strings.Contains(p.Fallback, tc.fallback) {
				t.Errorf("fallback = %q, want it to mention %q", p.Fallback, tc.fallback)
			}
		})
	}
}

func TestPhysicalCores(t *testing.T) {
	if n := PhysicalCores(); n < 1 {
		t.Errorf("PhysicalCores = %d", n)
	}
}
