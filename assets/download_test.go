package assets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/fstest"
	"time"
)

type testEnv struct {
	mgr  *Manager
	dir  string // models dir
	srv  *faultServer
	evMu sync.Mutex
	evs  []Event
}

func newTestEnv(t testing.TB, models []*Model, srv *faultServer, mod func(*Options)) *testEnv {
	t.Helper()
	root := t.TempDir()
	reg, err := newRegistry(models, embedSource{fsys: fstest.MapFS{}})
	if err != nil {
		t.Fatal(err)
	}
	te := &testEnv{dir: filepath.Join(root, "models"), srv: srv}
	opts := Options{
		Dir: te.dir, CacheDir: filepath.Join(root, "cache"),
		Parts: 4, MinPartSize: 64 << 10, Retries: 3, Backoff: time.Millisecond,
		StallTimeout: 10 * time.Second, ProgressInterval: 5 * time.Millisecond,
		FreeSpace: func(string) (uint64, error) { return 1 << 40, nil },
		Progress: func(ev Event) {
			te.evMu.Lock()
			te.evs = append(te.evs, ev)
			te.evMu.Unlock()
		},
	}
	if srv != nil {
		opts.Getenv = func(k string) string {
			if k == "HF_ENDPOINT" || k == "NPM_CONFIG_REGISTRY" {
				return srv.URL
			}
			return ""
		}
	}
	if mod != nil {
		mod(&opts)
	}
	te.mgr, err = NewManager(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return te
}

func oneFileModel(id, url string, size int64, sum string) *Model {
	return &Model{ID: id, Kind: KindASR, Description: "test", Licence: "MIT", Files: []File{{Path: "model.onnx", URLs: []string{url}, Size: size, SHA256: sum}}}
}

func (te *testEnv) read(t testing.TB, id, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(te.dir, id, file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (te *testEnv) noLeftovers(t testing.TB, id, file string) {
	t.Helper()
	for _, suffix := range []string{"", ".partial", ".partial.json"} {
		if _, err := os.Stat(filepath.Join(te.dir, id, file+suffix)); err == nil {
			t.Errorf("%s%s left behind", file, suffix)
		}
	}
}

func TestPullFaults(t *testing.T) {
	data := randomBytes(1<<20+12345, 1)
	tests := []struct {
		name   string
		fault  func(*faultServer)
		pinned bool
		opts   func(*Options)
		check  func(t *testing.T, log []string)
	}{
		{name: "parallel ranges", pinned: true, check: func(t *testing.T, log []string) {
			seen := map[string]bool{}
			for _, l := range log {
				if strings.Contains(l, "bytes=") && !strings.HasSuffix(l, "bytes=0-0") {
					if seen[l] {
						t.Errorf("range asked twice: %s", l)
					}
					seen[l] = true
				}
			}
			if want := (len(data) + 64<<10 - 1) / (64 << 10); len(seen) != want {
				t.Errorf("want %d ranged chunk requests, got %d: %v", want, len(seen), log)
			}
		}},
		{name: "dropped connections", pinned: true, fault: func(s *faultServer) { s.drops, s.dropAfter = 3, 100<<10 }},
		{name: "stalls", pinned: true, fault: func(s *faultServer) { s.stalls, s.stallAfter = 2, 50<<10 },
			opts: func(o *Options) { o.StallTimeout = 300 * time.Millisecond }},
		{name: "503 then fine", pinned: true, fault: func(s *faultServer) { s.busy = 3 }},
		{name: "server ignores Range", pinned: true, fault: func(s *faultServer) { s.noRange = true }},
		{name: "Range only on the probe", pinned: true, fault: func(s *faultServer) { s.noRangeParts = true }},
		{name: "416 on resume ranges", pinned: true, fault: func(s *faultServer) { s.r416 = 1 }},
		{name: "unpinned (trust on first use)", pinned: false, fault: func(s *faultServer) { s.drops, s.dropAfter = 1, 10<<10 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFaultServer(t)
			url := srv.add("/m.onnx", data)
			if tt.fault != nil {
				srv.set(tt.fault)
			}
			sum := ""
			if tt.pinned {
				sum = sha(data)
			}
			te := newTestEnv(t, []*Model{oneFileModel("m", url, 0, sum)}, srv, tt.opts)
			if err := te.mgr.Pull(context.Background(), "m"); err != nil {
				t.Fatalf("Pull: %v\nrequests: %v", err, srv.log())
			}
			if got := te.read(t, "m", "model.onnx"); !bytes.Equal(got, data) {
				t.Fatalf("installed file differs from the served one")
			}
			for _, s := range []string{".partial", ".partial.json"} {
				if _, err := os.Stat(filepath.Join(te.dir, "m", "model.onnx"+s)); err == nil {
					t.Errorf("%s left after install", s)
				}
			}
			rec := loadRecord(filepath.Join(te.dir, "m"))
			wantSrc := map[bool]string{true: "pinned", false: "download"}[tt.pinned]
			if r := rec.Files["model.onnx"]; r.SHA256 != sha(data) || r.Source != wantSrc || r.Size != int64(len(data)) {
				t.Errorf("record %+v, want sha %s from %s", r, sha(data), wantSrc)
			}
			st, _ := te.mgr.Verify(context.Background(), "m")
			if st.State != StateInstalled {
				t.Errorf("Verify after pull: %s %v", st.State, st.Problems())
			}
			if tt.check != nil {
				tt.check(t, srv.log())
			}
		})
	}
}

func TestPullErrors(t *testing.T) {
	data := randomBytes(300<<10, 2)
	tests := []struct {
		name  string
		setup func(s *faultServer) (url string, sum string)
		opts  func(*Options)
		want  []error
		msg   string
	}{
		{name: "404", setup: func(s *faultServer) (string, string) { return s.URL + "/nope", "" }, want: []error{ErrNotFound}, msg: "HTTP 404"},
		{name: "403", setup: func(s *faultServer) (string, string) {
			s.status["/secret"] = 403
			return s.URL + "/secret", ""
		}, want: []error{ErrForbidden}, msg: "HTTP 403"},
		{name: "wrong bytes against pinned hash", setup: func(s *faultServer) (string, string) {
			s.corrupt = true
			return s.add("/m", data), sha(data)
		}, want: []error{ErrChecksum}, msg: "the download is discarded"},
		{name: "stalls forever", setup: func(s *faultServer) (string, string) {
			s.stalls, s.stallAfter = 100, 0
			return s.add("/m", data), ""
		}, opts: func(o *Options) { o.Retries = 2; o.StallTimeout = 100 * time.Millisecond }, want: []error{ErrStalled}, msg: "no data for"},
		{name: "disk too small", setup: func(s *faultServer) (string, string) { return s.add("/m", data), "" },
			opts: func(o *Options) { o.FreeSpace = func(string) (uint64, error) { return 1000, nil } },
			want: []error{ErrNoSpace}, msg: "has 1000 B free"},
		{name: "wrong size", setup: func(s *faultServer) (string, string) { return s.add("/m", data[:1000]), "" },
			want: []error{ErrWrongSize}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFaultServer(t)
			var url, sum string
			srv.set(func(s *faultServer) {}) // ensure lock usable
			url, sum = tt.setup(srv)
			size := int64(0)
			if tt.name == "wrong size" {
				size = int64(len(data))
			}
			te := newTestEnv(t, []*Model{oneFileModel("m", url, size, sum)}, srv, tt.opts)
			err := te.mgr.Pull(context.Background(), "m")
			if err == nil {
				t.Fatal("Pull succeeded")
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("err = %v, want %v", err, w)
				}
			}
			if tt.msg != "" && !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v, want it to mention %q", err, tt.msg)
			}
			if _, err := os.Stat(filepath.Join(te.dir, "m", "model.onnx")); err == nil {
				t.Error("a file was installed despite the error")
			}
			if errors.Is(err, ErrChecksum) {
				te.noLeftovers(t, "m", "model.onnx")
			}
		})
	}
}

func TestMirrorFallback(t *testing.T) {
	srv := newFaultServer(t)
	data := randomBytes(5000, 3)
	good := srv.add("/good", data)
	m := &Model{ID: "m", Kind: KindTTS, Files: []File{{Path: "a/b.bin", URLs: []string{srv.URL + "/missing", good}, SHA256: sha(data)}}}
	te := newTestEnv(t, []*Model{m}, srv, nil)
	if err := te.mgr.Pull(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(te.read(t, "m", "a/b.bin"), data) {
		t.Fatal("content differs")
	}
}

// Hugging Face style: the sha256 comes from X-Linked-Etag on the redirect, is recorded at the
// first download, and every verify checks the file against it.
func TestServerPublishedHash(t *testing.T) {
	srv := newFaultServer(t)
	data := randomBytes(200<<10, 4)
	srv.add("/org/repo/cdn/main/model.onnx", data)
	srv.set(func(s *faultServer) { s.hf = true })
	te := newTestEnv(t, []*Model{oneFileModel("m", "hf://org/repo/model.onnx", 0, "")}, srv, nil)
	getenv := te.mgr.opts.Getenv
	te.mgr.opts.Getenv = func(k string) string {
		if k == "HF_TOKEN" {
			return "hf_secret"
		}
		return getenv(k)
	}
	if err := te.mgr.Pull(context.Background(), "m"); err != nil {
		t.Fatalf("Pull: %v (%v)", err, srv.log())
	}
	srv.set(func(s *faultServer) {
		for _, a := range s.auths {
			// The token goes to the Hugging Face endpoint only (here the CDN shares its host).
			if strings.Contains(a, "/resolve/") && !strings.HasSuffix(a, "Bearer hf_secret") {
				t.Errorf("request without the HF token: %q", a)
			}
		}
	})
	rec := loadRecord(filepath.Join(te.dir, "m"))
	if r := rec.Files["model.onnx"]; r.Source != "server" || r.SHA256 != sha(data) {
		t.Fatalf("record %+v: want the server-published hash", r)
	}
	// Flip one byte in place: the size check still passes, the hash check does not.
	p := filepath.Join(te.dir, "m", "model.onnx")
	b, _ := os.ReadFile(p)
	b[100] ^= 1
	os.WriteFile(p, b, 0o644)
	if st, _ := te.mgr.Status("m"); st.State != StateInstalled || st.Check != CheckSize {
		t.Errorf("cheap status %s/%s, want installed by size", st.State, st.Check)
	}
	st, err := te.mgr.Verify(context.Background(), "m")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateCorrupt || !strings.Contains(st.Files[0].Problem, "published by the server") {
		t.Errorf("verify: %s %v", st.State, st.Problems())
	}
	// A pull repairs it.
	if err := te.mgr.Pull(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	if st, _ := te.mgr.Verify(context.Background(), "m"); st.State != StateInstalled {
		t.Errorf("after repair: %s %v", st.State, st.Problems())
	}

	// Wrong bytes against the published hash are discarded.
	srv.set(func(s *faultServer) { s.corrupt = true })
	os.RemoveAll(filepath.Join(te.dir, "m"))
	err = te.mgr.Pull(context.Background(), "m")
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "published by the server") {
		t.Errorf("corrupt download: %v", err)
	}
	te.noLeftovers(t, "m", "model.onnx")
}

func TestEmptyFile(t *testing.T) {
	srv := newFaultServer(t)
	url := srv.add("/empty", []byte{})
	te := newTestEnv(t, []*Model{oneFileModel("m", url, 0, sha(nil))}, srv, nil)
	if err := te.mgr.Pull(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	if b := te.read(t, "m", "model.onnx"); len(b) != 0 {
		t.Fatalf("got %d bytes", len(b))
	}
}

// enospcFile fails writes with ENOSPC once limit bytes were written.
type enospcFile struct {
	WriteFile
	mu      sync.Mutex
	written int64
	limit   int64
}

func (f *enospcFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.written+int64(len(p)) > f.limit {
		return 0, &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}
	}
	f.written += int64(len(p))
	return f.WriteFile.WriteAt(p, off)
}

func TestDiskFillsUpThenResume(t *testing.T) {
	srv := newFaultServer(t)
	data := randomBytes(1<<20, 5)
	url := srv.add("/m", data)
	full := true
	te := newTestEnv(t, []*Model{oneFileModel("m", url, 0, sha(data))}, srv, func(o *Options) {
		o.Parts = 1
		o.OpenFile = func(name string) (WriteFile, error) {
			f, err := openFileRW(name)
			if err != nil || !full {
				return f, err
			}
			return &enospcFile{WriteFile: f, limit: 400 << 10}, nil
		}
	})
	err := te.mgr.Pull(context.Background(), "m")
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "disk filled up") {
		t.Fatalf("err = %v, want a disk-full error", err)
	}
	if _, err := os.Stat(filepath.Join(te.dir, "m", "model.onnx")); err == nil {
		t.Fatal("a file is in place after the disk filled up")
	}
	// Space freed: the pull resumes from the partial instead of starting over.
	full = false
	before := srv.served.Load()
	if err := te.mgr.Pull(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	if got := srv.served.Load() - before; got >= int64(len(data)) {
		t.Errorf("resume transferred %d bytes, want less than the whole %d", got, len(data))
	}
	if !bytes.Equal(te.read(t, "m", "model.onnx"), data) {
		t.Fatal("content differs")
	}
}

func TestCancelThenResume(t *testing.T) {
	srv := newFaultServer(t)
	data := randomBytes(2<<20, 6)
	url := srv.add("/m", data)
	srv.set(func(s *faultServer) { s.throttle = 2 * time.Millisecond })
	te := newTestEnv(t, []*Model{oneFileModel("m", url, int64(len(data)), sha(data))}, srv, nil)
	ctx, cancel := context.WithCancel(context.Background())
	te.mgr.opts.Progress = func(ev Event) {
		if ev.Phase == "download" && ev.Done > 512<<10 {
			cancel()
		}
	}
	err := te.mgr.Pull(ctx, "m")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	sc := loadSidecar(filepath.Join(te.dir, "m", "model.onnx.partial.json"))
	if sc == nil || sc.done() == 0 {
		t.Fatalf("no resume record after cancel: %+v", sc)
	}
	if st, _ := te.mgr.Status("m"); st.State != StatePartial {
		t.Errorf("status after cancel: %s", st.State)
	}
	te.mgr.opts.Progress = nil
	srv.set(func(s *faultServer) { s.throttle = 0 })
	before := srv.served.Load()
	if err := te.mgr.Pull(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	if got := srv.served.Load() - before; got > int64(len(data))-sc.done()+int64(4*64<<10) {
		t.Errorf("resume transferred %d bytes; %d were already on disk of %d", got, sc.done(), len(data))
	}
	if !bytes.Equal(te.read(t, "m", "model.onnx"), data) {
		t.Fatal("content differs")
	}
}

func TestConcurrentPullsShareOneDownload(t *testing.T) {
	srv := newFaultServer(t)
	data := randomBytes(1<<20, 7)
	url := srv.add("/m", data)
	srv.set(func(s *faultServer) { s.throttle = time.Millisecond })
	te := newTestEnv(t, []*Model{oneFileModel("m", url, 0, sha(data))}, srv, nil)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = te.mgr.Pull(context.Background(), "m")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// One probe byte plus the file, once.
	if got := srv.served.Load(); got != int64(len(data))+1 {
		t.Errorf("server sent %d bytes for a %d-byte file pulled 4 times at once", got, len(data))
	}
}

func TestStatusStates(t *testing.T) {
	data := randomBytes(1000, 8)
	m := &Model{ID: "m", Kind: KindASR, Files: []File{
		{Path: "a.onnx", URLs: []string{"https://example.invalid/a"}, Size: 1000, SHA256: sha(data)},
		{Path: "tokens.txt", URLs: []string{"https://example.invalid/t"}, Size: 3},
	}}
	te := newTestEnv(t, []*Model{m}, nil, nil)
	dir := filepath.Join(te.dir, "m")
	state := func() State {
		st, err := te.mgr.Status("m")
		if err != nil {
			t.Fatal(err)
		}
		return st.State
	}
	if s := state(); s != StateMissing {
		t.Errorf("empty: %s", s)
	}
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "a.onnx.partial"), data[:10], 0o644)
	if s := state(); s != StatePartial {
		t.Errorf("partial download: %s", s)
	}
	os.Remove(filepath.Join(dir, "a.onnx.partial"))
	os.WriteFile(filepath.Join(dir, "a.onnx"), data, 0o644)
	if s := state(); s != StatePartial {
		t.Errorf("one of two files: %s", s)
	}
	os.WriteFile(filepath.Join(dir, "tokens.txt"), []byte("abcd"), 0o644)
	if s := state(); s != StateCorrupt {
		t.Errorf("wrong size: %s", s)
	}
	os.WriteFile(filepath.Join(dir, "tokens.txt"), []byte("abc"), 0o644)
	if s := state(); s != StateInstalled {
		t.Errorf("complete: %s", s)
	}
	if p, err := te.mgr.Path(context.Background(), "m"); err != nil || p != dir {
		t.Errorf("Path = %q, %v", p, err)
	}
	bad := append([]byte(nil), data...)
	bad[0] ^= 1
	os.WriteFile(filepath.Join(dir, "a.onnx"), bad, 0o644)
	st, _ := te.mgr.Verify(context.Background(), "m")
	if st.State != StateCorrupt || st.Check != CheckHash || !strings.Contains(st.Files[0].Problem, "pinned in the registry") {
		t.Errorf("verify of a damaged file: %s %s %v", st.State, st.Check, st.Problems())
	}
	if err := te.mgr.Remove(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	if s := state(); s != StateMissing {
		t.Errorf("after rm: %s", s)
	}
	_, err := te.mgr.Path(context.Background(), "m")
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "parley models pull m") {
		t.Errorf("Path of a missing model: %v", err)
	}
}

func TestEmbeddedModel(t *testing.T) {
	onnx := randomBytes(3000, 9)
	fsys := fstest.MapFS{
		"demo/README.md":   {Data: []byte("docs")},
		"demo/model.onnx":  {Data: onnx},
		"demo/tokens.txt":  {Data: []byte("<blk> 0\n")},
		"empty/README.md":  {Data: []byte("docs")},
		"demo/.hidden.bin": {Data: []byte("x")},
		"demo2/sub/m.onnx": {Data: []byte("sub")},
	}
	models := []*Model{
		{ID: "demo", Kind: KindASR, Demo: true, Embedded: "demo"},
		{ID: "absent", Kind: KindASR, Demo: true, Embedded: "empty"},
		{ID: "sub", Kind: KindASR, Demo: true, Embedded: "demo2"},
		{ID: "notyet", Kind: KindASR, Demo: true, Embedded: "demo/sensevoice"},
	}
	reg, err := newRegistry(models, embedSource{fsys: fsys})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := reg.Lookup("demo")
	if len(m.Files) != 2 {
		t.Fatalf("embedded files: %+v (README and dotfiles must be skipped)", m.Files)
	}
	if sub, _ := reg.Lookup("sub"); len(sub.Files) != 1 || sub.Files[0].Path != "m.onnx" {
		t.Errorf("a model in demo2/sub/: %+v", sub.Files)
	}
	mgr, _ := NewManager(reg, Options{Dir: t.TempDir()})
	if st, _ := mgr.Status("demo"); st.State != StateInstalled || st.Extracted {
		t.Errorf("before first use: %s extracted=%v", st.State, st.Extracted)
	}
	dir, err := mgr.Path(context.Background(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "model.onnx")); !bytes.Equal(b, onnx) {
		t.Fatal("extracted bytes differ")
	}
	st, _ := mgr.Verify(context.Background(), "demo")
	if st.State != StateInstalled || !st.Extracted {
		t.Errorf("after extraction: %s %v", st.State, st.Problems())
	}
	// an upgrade: the copy a previous build extracted (another model, the same size or not)
	// is still the recogniser to use, and is written again from this build on first use
	for _, old := range [][]byte{randomBytes(3000, 10), randomBytes(1234, 11)} {
		os.WriteFile(filepath.Join(dir, "model.onnx"), old, 0o644)
		rec := loadRecord(dir)
		rec.set("model.onnx", fileRecord{Size: int64(len(old)), SHA256: sha256Hex(old), Source: "embedded"})
		rec.save(dir)
		if st, _ := mgr.Status("demo"); st.State != StateInstalled || st.Extracted {
			t.Errorf("a copy from another build (%d bytes): %s extracted=%v, want available and not extracted", len(old), st.State, st.Extracted)
		}
		if best, ok := mgr.BestInstalled(KindASR); !ok || best != "demo" {
			t.Errorf("BestInstalled = %q, %v with a stale copy", best, ok)
		}
		if _, err := mgr.Path(context.Background(), "demo"); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "model.onnx")); !bytes.Equal(b, onnx) {
			t.Fatalf("the stale copy (%d bytes) was not replaced by this build's", len(old))
		}
	}
	if st, _ := mgr.Status("absent"); st.State != StateUnavailable {
		t.Errorf("embedded model without files: %s", st.State)
	}
	if st, _ := mgr.Status("notyet"); st.State != StateUnavailable {
		t.Errorf("embedded model whose directory is not in the build: %s", st.State)
	}
	if _, err := mgr.Path(context.Background(), "absent"); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("Path(absent) = %v", err)
	}
}

func TestProgressPrinter(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgressPrinter(&buf, false)
	p(Event{Model: "m", File: "f", Phase: "download", Done: 5, Total: 10, Rate: 100, ETA: 0.05})
	if got := buf.String(); got != `{"model":"m","file":"f","phase":"download","done":5,"total":10,"rate":100,"eta_s":0.05}`+"\n" {
		t.Errorf("JSON line: %s", got)
	}
	buf.Reset()
	p = NewProgressPrinter(&buf, true)
	p(Event{Model: "m", File: "f", Phase: "download", Done: 5 << 20, Total: 10 << 20, Rate: 1 << 20, ETA: 5})
	p(Event{Model: "m", File: "f", Phase: "installed", Done: 10 << 20, Total: 10 << 20})
	got := buf.String()
	for _, want := range []string{"[============>           ]  50%", "5.0 MiB/10.0 MiB", "1.0 MiB/s", "ETA 5s", "\nm/f: installed (10.0 MiB)\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("bar output %q lacks %q", got, want)
		}
	}
}

func TestContentRange(t *testing.T) {
	tests := []struct {
		in              string
		start, end, tot int64
		ok              bool
	}{
		{"bytes 0-0/10", 0, 0, 10, true},
		{"bytes 5-9/*", 5, 9, -1, true},
		{"bytes 5-4/10", 0, 0, 0, false},
		{"bytes 0-10/10", 0, 0, 0, false},
		{"items 0-1/2", 0, 0, 0, false},
		{"bytes */10", 0, 0, 0, false},
	}
	for _, tt := range tests {
		s, e, n, err := parseContentRange(tt.in)
		if (err == nil) != tt.ok || tt.ok && (s != tt.start || e != tt.end || n != tt.tot) {
			t.Errorf("parseContentRange(%q) = %d %d %d %v", tt.in, s, e, n, err)
		}
	}
}

func FuzzContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-0/10", "bytes 5-9/*", "bytes */0", "bytes 9223372036854775807-9223372036854775807/*", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		start, end, total, err := parseContentRange(v)
		if err != nil {
			return
		}
		if start < 0 || end < start || total != -1 && total <= end {
			t.Fatalf("%q → %d-%d/%d accepted", v, start, end, total)
		}
	})
}

// A resume record read back from disk is outside input: a damaged one is discarded, never
// trusted into gaps, overlaps or a flood of parts.
func FuzzSidecar(f *testing.F) {
	f.Add([]byte(`{"url":"u","total":100,"ranges":true,"parts":[{"start":0,"end":50,"done":10},{"start":50,"end":100,"done":50}]}`))
	f.Add([]byte(`{"total":100,"parts":[{"start":0,"end":40,"done":0},{"start":60,"end":100,"done":0}]}`))
	f.Add([]byte(`{"total":-1,"parts":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "s.json")
		os.WriteFile(p, data, 0o644)
		sc := loadSidecar(p)
		if sc == nil || !sc.matches(probeInfo{Total: sc.Total}) {
			return
		}
		next := int64(0)
		for _, pt := range sc.Parts {
			if pt.Start != next || pt.Done < 0 || pt.Start+pt.Done > pt.End {
				t.Fatalf("accepted a bad part %+v in %s", pt, data)
			}
			next = pt.End
		}
		if next != sc.Total || len(sc.Parts) > maxParts {
			t.Fatalf("accepted parts that do not tile the file: %s", data)
		}
	})
}

// A host that cannot be reached is tried once per pull, not once per file with retries.
func TestUnreachableHostSkipped(t *testing.T) {
	srv := newFaultServer(t)
	var files []File
	for i := range 3 {
		data := randomBytes(1000+i, uint64(30+i))
		good := srv.add(fmt.Sprintf("/f%d", i), data)
		files = append(files, File{Path: fmt.Sprintf("f%d", i), URLs: []string{fmt.Sprintf("http://dead.invalid/f%d", i), good}, SHA256: sha(data)})
	}
	var mu sync.Mutex
	dials := map[string]int{}
	te := newTestEnv(t, []*Model{{ID: "m", Kind: KindTTS, Files: files}}, srv, func(o *Options) {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		dialer := &net.Dialer{}
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dials[addr]++
			mu.Unlock()
			if strings.HasPrefix(addr, "dead.invalid") {
				return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
			}
			return dialer.DialContext(ctx, network, addr)
		}
		o.Client = &http.Client{Transport: tr}
	})
	if err := te.mgr.Pull(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	if n := dials["dead.invalid:80"]; n != 1 {
		t.Errorf("the unreachable host was dialled %d times, want 1", n)
	}
}

func TestSidecarMatches(t *testing.T) {
	sum := strings.Repeat("a", 64)
	base := sidecar{Total: 100, ETag: `"e1"`, ServerSHA: sum, Parts: []part{{0, 50, 10}, {50, 100, 0}}}
	tests := []struct {
		name string
		mod  func(*sidecar)
		info probeInfo
		want bool
	}{
		{"same file", nil, probeInfo{Total: 100, ETag: `"e1"`, ServerSHA: sum}, true},
		{"other CDN ETag, same published hash", nil, probeInfo{Total: 100, ETag: `"e2"`, ServerSHA: sum}, true},
		{"other published hash", nil, probeInfo{Total: 100, ETag: `"e1"`, ServerSHA: strings.Repeat("b", 64)}, false},
		{"other ETag, no hash", func(s *sidecar) { s.ServerSHA = "" }, probeInfo{Total: 100, ETag: `"e2"`}, false},
		{"other size", nil, probeInfo{Total: 101, ETag: `"e1"`, ServerSHA: sum}, false},
		{"gap between parts", func(s *sidecar) { s.Parts[1].Start = 60 }, probeInfo{Total: 100, ServerSHA: sum}, false},
		{"done beyond part", func(s *sidecar) { s.Parts[0].Done = 51 }, probeInfo{Total: 100, ServerSHA: sum}, false},
		{"unknown total", func(s *sidecar) { s.Total = -1 }, probeInfo{Total: -1}, false},
	}
	for _, tt := range tests {
		s := base
		s.Parts = append([]part(nil), base.Parts...)
		if tt.mod != nil {
			tt.mod(&s)
		}
		if got := s.matches(tt.info); got != tt.want {
			t.Errorf("%s: matches = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A server that gives no size and ignores Range, then sends more bytes than the registry's size
// for the file (an endless body, here cut at 64 MiB), must not fill the disk: the transfer
// stops at the registry's size with a wrong-size error and leaves nothing behind.
func TestUnknownLengthCappedAtRegistrySize(t *testing.T) {
	const size = 100 << 10
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK) // no Content-Length: chunked, size unknown
		buf := make([]byte, 32<<10)
		for sent.Load() < 64<<20 {
			n, err := w.Write(buf)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	te := newTestEnv(t, []*Model{oneFileModel("m", srv.URL+"/m", size, "")}, nil, nil)
	err := te.mgr.Pull(context.Background(), "m")
	if !errors.Is(err, ErrWrongSize) {
		t.Fatalf("Pull = %v, want ErrWrongSize", err)
	}
	if n := sent.Load(); n >= 64<<20 {
		t.Errorf("the whole endless body (%d bytes) was read for a %d-byte file", n, size)
	}
	te.noLeftovers(t, "m", "model.onnx")
}

// A pull that joins another caller's download must not inherit that caller's deadline: when
// the first caller times out, the second pulls on with its own context.
func TestSharedPullOutlivesTheFirstCallersDeadline(t *testing.T) {
	data := randomBytes(10<<10, 9)
	hit := make(chan struct{})
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 { // the first caller's probe hangs
			close(hit)
			<-r.Context().Done()
			return
		}
		http.ServeContent(w, r, "m", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	te := newTestEnv(t, []*Model{oneFileModel("m", srv.URL+"/m", int64(len(data)), sha(data))}, nil, nil)
	ctxA, cancelA := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancelA()
	errA := make(chan error, 1)
	go func() { errA <- te.mgr.Pull(ctxA, "m") }()
	<-hit // A's download is under way and hangs
	errB := make(chan error, 1)
	go func() { errB <- te.mgr.Pull(context.Background(), "m") }() // joins A's
	if err := <-errA; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first pull = %v, want its deadline", err)
	}
	if err := <-errB; err != nil {
		t.Fatalf("second pull = %v, want it to go on after the first caller's deadline", err)
	}
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// An optional file with a source is installed when the source has it, and skipped without an
// error when the source answers 404 (an ONNX export whose weights are inside the graph has no
// .onnx_data beside it).
func TestPullOptionalFile(t *testing.T) {
	srv := newFaultServer(t)
	graph, weights := randomBytes(2000, 3), randomBytes(5000, 4)
	model := func(id string) *Model {
		return &Model{ID: id, Kind: KindLLM, Description: "test", Licence: "MIT", Files: []File{
			{Path: "onnx/model_q4.onnx", URLs: []string{srv.URL + "/" + id + "/model_q4.onnx"}},
			{Path: "onnx/model_q4.onnx_data", URLs: []string{srv.URL + "/" + id + "/model_q4.onnx_data"}, Optional: true},
		}}
	}
	srv.add("/inside/model_q4.onnx", graph)
	srv.add("/outside/model_q4.onnx", graph)
	srv.add("/outside/model_q4.onnx_data", weights)
	te := newTestEnv(t, []*Model{model("inside"), model("outside")}, srv, nil)
	ctx := context.Background()
	if err := te.mgr.Pull(ctx, "inside"); err != nil {
		t.Fatalf("an optional file the source does not have: %v", err)
	}
	if _, err := os.Stat(filepath.Join(te.dir, "inside", "onnx", "model_q4.onnx_data")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an absent optional file was written: %v", err)
	}
	if st, err := te.mgr.Status("inside"); err != nil || st.State != StateInstalled {
		t.Errorf("without its optional file: %+v, %v", st, err)
	}
	if err := te.mgr.Pull(ctx, "outside"); err != nil {
		t.Fatal(err)
	}
	if got := te.read(t, "outside", "onnx/model_q4.onnx_data"); !bytes.Equal(got, weights) {
		t.Error("the optional file the source has was not installed")
	}
}
