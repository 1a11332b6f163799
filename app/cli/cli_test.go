package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/app/wire"
)

// isolate points every Parley directory at a fresh temporary tree.
func isolate(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	t.Setenv("PARLEY_CONFIG", "")
	return dir
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb, nil)
	return code, out.String(), errb.String()
}

func TestCLIExitCodes(t *testing.T) {
	dir := isolate(t)
	badCfg := filepath.Join(dir, "bad.toml")
	os.WriteFile(badCfg, []byte("[llm]\nurll = 1\n"), 0o644)
	tests := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"version"}, 0, "parley", ""},
		{[]string{"--version"}, 0, "parley", ""},
		{[]string{"config", "path"}, 0, "config.toml", ""},
		{[]string{"config", "keys"}, 0, "PARLEY_LLM_URL", ""},
		{[]string{"config", "show"}, 0, "[runtime]", ""},
		{[]string{"config", "bogus"}, 2, "", "unknown config command"},
		{[]string{"confg", "path"}, 2, "", `did you mean "config"`},
		{[]string{"--config", badCfg, "version"}, 1, "", "llm.urll"},
		{[]string{"--set", "tts.speed=10", "version"}, 1, "", "tts.speed"},
		{[]string{"--provider", "rocm", "version"}, 1, "", "runtime.provider"},
		{[]string{"--log-level", "chatty", "version"}, 1, "", "log.level"},
		{[]string{"--no-such-flag"}, 2, "", "flag provided but not defined"},
		// global flags after the command; the command named once in the error
		{[]string{"serve", "--set", "serve.addr=notanaddr"}, 1, "", "parley serve: bad configuration: serve.addr"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			if !strings.Contains(out, tc.stdout) {
				t.Errorf("stdout %q lacks %q", out, tc.stdout)
			}
			if !strings.Contains(errOut, tc.stderr) {
				t.Errorf("stderr %q lacks %q", errOut, tc.stderr)
			}
		})
	}
}

func TestServeHealthAndShutdown(t *testing.T) {
	isolate(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out, errb bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--serve", "--set", "serve.addr=" + addr}, strings.NewReader(""), &out, &errb, nil)
	}()
	var resp *http.Response
	for i := 0; i < 100; i++ {
		resp, err = http.Get(fmt.Sprintf("http://%s/health", addr))
		if err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		cancel()
		t.Fatalf("server never answered: %v\n%s", err, errb.String())
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/health = %d", resp.StatusCode)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("serve exited %d: %s", code, errb.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after its context was cancelled")
	}
}

func TestServeAddressInUse(t *testing.T) {
	isolate(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, errOut := runCLI(t, "--serve", "--set", "serve.addr="+ln.Addr().String())
	if code != 1 || !strings.Contains(errOut, "listen on") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestDoctorReportsMissingRuntime(t *testing.T) {
	dir := isolate(t)
	t.Setenv("PARLEY_MODELS", filepath.Join(dir, "models"))
	// gpu.Init runs once per process, so this test checks the report shape rather than
	// forcing a second initialisation: JSON output, and a non-zero exit naming each problem.
	code, out, errOut := runCLI(t, "doctor", "--json")
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json is not JSON: %v\n%s", err, out)
	}
	if rep.ModelsDir != filepath.Join(dir, "models") {
		t.Errorf("models dir = %s", rep.ModelsDir)
	}
	if len(rep.GPU.Devices) == 0 && rep.GPU.Reason == "" {
		t.Error("no GPUs and no reason")
	}
	// An empty models dir lacks the essential set-up models.
	if code == 0 || len(rep.Problems) == 0 {
		t.Fatalf("doctor with an empty models dir exited %d with no problems: %s", code, errOut)
	}
	joined := strings.Join(rep.Problems, "\n")
	for _, id := range wire.Essential() {
		if !strings.Contains(joined, id) {
			t.Errorf("problems do not mention %s: %s", id, joined)
		}
	}
	if !strings.Contains(joined, "parley doctor --fetch") {
		t.Errorf("problems give no remedy: %s", joined)
	}
}

func TestConfigShowHidesSecrets(t *testing.T) {
	isolate(t)
	t.Setenv("PARLEY_LLM_API_KEY", "sk-very-secret")
	t.Setenv("PARLEY_SERVE_API_KEY", "serve-secret")
	code, out, errOut := runCLI(t, "config", "show")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "very-secret") || strings.Contains(out, "serve-secret") {
		t.Errorf("config show printed an API key:\n%s", out)
	}
	if !strings.Contains(out, "(set, hidden)") {
		t.Errorf("config show does not say the key is set:\n%s", out)
	}
}
