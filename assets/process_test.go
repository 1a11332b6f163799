package assets

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"testing/fstest"
	"time"
)

// TestMain doubles as a helper process: with PARLEY_ASSETS_HELPER=pull the test binary pulls
// one model and exits, so tests can kill it mid-download or run two at once.
func TestMain(m *testing.M) {
	if os.Getenv("PARLEY_ASSETS_HELPER") == "pull" {
		os.Exit(helperPull())
	}
	os.Exit(m.Run())
}

func helperPull() int {
	size, _ := strconv.ParseInt(os.Getenv("H_SIZE"), 10, 64)
	model := &Model{ID: "m", Kind: KindASR, Files: []File{{Path: "model.onnx", URLs: []string{os.Getenv("H_URL")}, Size: size, SHA256: os.Getenv("H_SHA")}}}
	reg, err := newRegistry([]*Model{model}, embedSource{fsys: fstest.MapFS{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	mgr, err := NewManager(reg, Options{Dir: os.Getenv("H_DIR"), CacheDir: os.Getenv("H_CACHE"),
		Parts: 4, MinPartSize: 1 << 20, Backoff: time.Millisecond, StallTimeout: time.Minute,
		Progress: func(ev Event) {
			if ev.Phase == "waiting" {
				fmt.Println("waited for the lock")
			}
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := mgr.Pull(context.Background(), "m"); err != nil {
		fmt.Fprintln(os.Stderr, "pull:", err)
		return 1
	}
	return 0
}

func helperCmd(t *testing.T, url, dir string, data []byte) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "PARLEY_ASSETS_HELPER=pull", "H_URL="+url, "H_DIR="+dir,
		"H_CACHE="+filepath.Join(dir, "cache"), "H_SHA="+sha(data), "H_SIZE="+strconv.Itoa(len(data)))
	return cmd
}

// A pull killed with SIGKILL mid-transfer resumes from its resume record.
func TestResumeAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a helper process")
	}
	srv := newFaultServer(t)
	data := randomBytes(4<<20, 10)
	url := srv.add("/m", data)
	// Every part stalls half-way, so the helper is mid-download when it is killed.
	srv.set(func(s *faultServer) { s.stalls, s.stallAfter = 4, 512<<10 })
	dir := t.TempDir()
	cmd := helperCmd(t, url, dir, data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	side := filepath.Join(dir, "m", "model.onnx.partial.json")
	deadline := time.Now().Add(60 * time.Second)
	for {
		if sc := loadSidecar(side); sc != nil && sc.done() >= 4*(512<<10) {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the helper never recorded progress; stderr: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	sc := loadSidecar(side)
	if _, err := os.Stat(filepath.Join(dir, "m", "model.onnx")); err == nil {
		t.Fatal("the killed pull installed a file")
	}

	srv.set(func(s *faultServer) { s.stalls = 0 })
	before := srv.served.Load()
	model := oneFileModel("m", url, int64(len(data)), sha(data))
	reg, _ := newRegistry([]*Model{model}, embedSource{fsys: fstest.MapFS{}})
	mgr, _ := NewManager(reg, Options{Dir: dir, CacheDir: filepath.Join(dir, "cache"), Parts: 4, MinPartSize: 64 << 10, Backoff: time.Millisecond})
	if err := mgr.Pull(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "m", "model.onnx"))
	if !bytes.Equal(got, data) {
		t.Fatal("resumed file differs")
	}
	if sent := srv.served.Load() - before; sent > int64(len(data))-sc.done()+1 {
		t.Errorf("resume fetched %d bytes; %d of %d were recorded before the kill", sent, sc.done(), len(data))
	}
}

// Two processes pulling the same model download it once: the second waits on the lock file and
// finds the model installed.
func TestCrossProcessPullsShareOneDownload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts helper processes")
	}
	srv := newFaultServer(t)
	data := randomBytes(2<<20, 11)
	url := srv.add("/m", data)
	srv.set(func(s *faultServer) { s.throttle = 10 * time.Millisecond })
	dir := t.TempDir()
	var wg sync.WaitGroup
	var stdout [2]bytes.Buffer
	errs := make([]error, 2)
	outs := make([]bytes.Buffer, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := helperCmd(t, url, dir, data)
			cmd.Stderr = &outs[i]
			cmd.Stdout = &stdout[i]
			errs[i] = cmd.Run()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("helper %d: %v: %s", i, err, outs[i].String())
		}
	}
	if got := srv.served.Load(); got != int64(len(data))+1 {
		t.Errorf("server sent %d bytes for a %d-byte file pulled by two processes", got, len(data))
	}
	t.Logf("helper outputs: %q %q", stdout[0].String(), stdout[1].String())
	got, _ := os.ReadFile(filepath.Join(dir, "m", "model.onnx"))
	if !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
}
