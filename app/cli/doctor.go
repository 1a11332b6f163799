package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio/device"
	"github.com/parley-voice/parley/gpu"
)

func init() {
	register(&command{
		name:  "doctor",
		usage: "doctor [--json] [--verify]  check the runtime, GPUs, audio devices and models",
		run:   runDoctor,
	})
}

// essentialModels must be present for Parley's offline defaults to work.
var essentialModels = []string{"silero-vad-v5", "openwakeword"}

// doctorReport is what doctor found; --json prints it as is.
type doctorReport struct {
	Version    string `json:"version"`
	ConfigFile string `json:"config_file"`
	ConfigNote string `json:"config_note,omitempty"`
	ModelsDir  string `json:"models_dir"`
	DataDir    string `json:"data_dir"`
	CacheDir   string `json:"cache_dir"`

	ORT struct {
		Library   string   `json:"library,omitempty"`
		Version   string   `json:"version,omitempty"`
		Providers []string `json:"providers,omitempty"`
		Requested string   `json:"requested"`
		Using     string   `json:"using,omitempty"`
		Fallback  string   `json:"fallback,omitempty"`
		Error     string   `json:"error,omitempty"`
	} `json:"onnxruntime"`

	GPU struct {
		gpu.GPUReport
		Error string `json:"error,omitempty"`
	} `json:"gpu"`

	Audio struct {
		Devices []device.Info `json:"devices"`
		Error   string        `json:"error,omitempty"`
	} `json:"audio"`

	Models      []assets.ModelStatus `json:"models"`
	ModelsError string               `json:"models_error,omitempty"`

	Problems []string `json:"problems"`
}

func runDoctor(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	verify := fs.Bool("verify", false, "hash every model file instead of checking sizes")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q (parley doctor [--json] [--verify])", errUsage, fs.Args())
	}
	r := diagnose(ctx, env.Config, *verify)
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		printDoctor(env.Stdout, r)
	}
	if len(r.Problems) > 0 {
		return fmt.Errorf("%d problem(s) found; see above", len(r.Problems))
	}
	return nil
}

func diagnose(ctx context.Context, cfg *config.Config, verify bool) *doctorReport {
	r := &doctorReport{
		Version: version, ConfigFile: cfg.Path,
		ModelsDir: assets.ModelsDir(), DataDir: assets.DataDir(), CacheDir: assets.CacheDir(),
	}
	if r.ConfigFile == "" {
		r.ConfigFile = cfg.File // --config or $PARLEY_CONFIG, not created yet
		if r.ConfigFile == "" {
			r.ConfigFile = config.DefaultPath()
		}
		r.ConfigNote = "not created; defaults in use"
	}
	problem := func(format string, a ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, a...)) }

	// ONNX Runtime and the provider every engine would get.
	r.ORT.Requested = cfg.Runtime.Provider
	if err := gpu.Init(); err != nil {
		r.ORT.Error = err.Error()
		problem("ONNX Runtime: %v", err)
	} else {
		r.ORT.Library, r.ORT.Version = gpu.LibraryPath(), gpu.Version()
		r.ORT.Providers = gpu.AvailableProviders()
	}

	gpus, err := gpu.DiscoverGPUs()
	r.GPU.GPUReport = gpus
	if err != nil {
		r.GPU.Error = err.Error()
	}
	if spec, err := gpu.ParseProvider(cfg.Runtime.Provider); err == nil && r.ORT.Error == "" {
		plan := gpu.PlanProvider(spec, r.ORT.Library, gpus)
		r.ORT.Using, r.ORT.Fallback = plan.Use.String(), plan.Fallback
	}

	// Audio devices. None is not fatal (a server needs none); a broken audio stack is noted.
	if host, err := device.Open(nil); err != nil {
		r.Audio.Error = err.Error()
	} else {
		r.Audio.Devices, err = host.Devices()
		if err != nil {
			r.Audio.Error = err.Error()
		}
		host.Close()
	}

	// Models.
	reg, err := assets.DefaultRegistry()
	if err != nil {
		r.ModelsError = err.Error()
		problem("model registry: %v", err)
		return r
	}
	mgr, err := assets.NewManager(reg, assets.Options{})
	if err != nil {
		r.ModelsError = err.Error()
		problem("models: %v", err)
		return r
	}
	check := assets.CheckSize
	if verify {
		check = assets.CheckHash
	}
	r.Models, err = mgr.List(ctx, check)
	if err != nil {
		r.ModelsError = err.Error()
		problem("models: %v", err)
	}
	byID := map[string]assets.ModelStatus{}
	for _, m := range r.Models {
		byID[m.ID] = m
		if m.State == assets.StateCorrupt {
			problem("model %s is corrupt; run `parley models pull %s` to repair it", m.ID, m.ID)
		}
	}
	for _, id := range essentialModels {
		if m, ok := byID[id]; !ok || m.State != assets.StateInstalled {
			problem("model %s is %s; run `make setup` (or `parley models pull %s`)", id, stateOf(m, ok), id)
		}
	}
	if _, ok := mgr.BestInstalled(assets.KindASR); !ok {
		problem("no speech recognition model is available; run `parley models pull sensevoice-small-int8`")
	}
	return r
}

func stateOf(m assets.ModelStatus, ok bool) string {
	if !ok {
		return "unknown to the registry"
	}
	return string(m.State)
}

func printDoctor(w io.Writer, r *doctorReport) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	line := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
	fmt.Fprintf(tw, "Parley %s\n", r.Version)
	cfgLine := r.ConfigFile
	if r.ConfigNote != "" {
		cfgLine += " (" + r.ConfigNote + ")"
	}
	line("config", cfgLine)
	line("models", r.ModelsDir)
	line("data", r.DataDir)
	line("cache", r.CacheDir)

	fmt.Fprintln(tw, "ONNX Runtime")
	if r.ORT.Error != "" {
		line("error", r.ORT.Error)
	} else {
		line("library", r.ORT.Library)
		line("version", r.ORT.Version)
		line("providers", strings.Join(r.ORT.Providers, ", "))
		using := r.ORT.Using
		if r.ORT.Fallback != "" {
			using += " (fallback: " + r.ORT.Fallback + ")"
		}
		line("provider", fmt.Sprintf("%s → %s", r.ORT.Requested, using))
	}

	fmt.Fprintln(tw, "GPUs")
	if len(r.GPU.Devices) == 0 {
		line("none", "no NVIDIA GPU: "+r.GPU.Reason)
	}
	for _, d := range r.GPU.Devices {
		line(fmt.Sprintf("cuda:%d", d.Index), fmt.Sprintf("%s, %.1f GiB (%.1f GiB free)", d.Name, gib(d.MemoryTotal), gib(d.MemoryFree)))
	}
	if len(r.GPU.Devices) > 0 {
		line("driver", fmt.Sprintf("%s (CUDA %s)", r.GPU.DriverVersion, r.GPU.CUDAVersion))
	}

	fmt.Fprintln(tw, "Audio devices")
	if r.Audio.Error != "" {
		line("error", r.Audio.Error)
	} else if len(r.Audio.Devices) == 0 {
		line("none", "no audio devices (fine for --serve)")
	}
	for _, d := range r.Audio.Devices {
		var tags []string
		if d.MaxInputChannels > 0 {
			tags = append(tags, fmt.Sprintf("in %d", d.MaxInputChannels))
		}
		if d.MaxOutputChannels > 0 {
			tags = append(tags, fmt.Sprintf("out %d", d.MaxOutputChannels))
		}
		if d.DefaultInput {
			tags = append(tags, "default input")
		}
		if d.DefaultOutput {
			tags = append(tags, "default output")
		}
		line(fmt.Sprintf("%d", d.Index), fmt.Sprintf("%s [%s] %.0f Hz, %s", d.Name, d.HostAPI, d.DefaultSampleRate, strings.Join(tags, ", ")))
	}

	fmt.Fprintln(tw, "Models")
	if r.ModelsError != "" {
		line("error", r.ModelsError)
	}
	for _, m := range r.Models {
		note := string(m.State)
		if m.Demo {
			note += ", demo-grade"
		}
		if m.Embedded {
			note += ", embedded"
		}
		line(m.ID, fmt.Sprintf("%s\t%s", m.Kind, note))
	}
	tw.Flush()
	if len(r.Problems) == 0 {
		fmt.Fprintln(w, "\nAll essential parts are present.")
		return
	}
	fmt.Fprintln(w, "\nProblems:")
	for _, p := range r.Problems {
		fmt.Fprintln(w, "  - "+p)
	}
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }
