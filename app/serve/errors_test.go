package serve

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/app/config"
)

// TestErrorBodyShape: every error body is exactly OpenAI's {"error":{"message","type","param",
// "code"}}; Retry-After travels as a header, not as an extra field.
func TestErrorBodyShape(t *testing.T) {
	for _, e := range []*APIError{
		invalid("file", "bad %s", "upload"),
		busy("asr", 3*time.Second),
		tooLarge("too big"),
		unavailable("none"),
		internal("boom"),
		modelNotFound("x"),
	} {
		rec := httptest.NewRecorder()
		writeError(rec, e)
		var body map[string]map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %v", rec.Body, err)
		}
		var keys []string
		for k := range body["error"] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if want := []string{"code", "message", "param", "type"}; !slices.Equal(keys, want) || len(body) != 1 {
			t.Errorf("%d error body %s: keys %v, want {\"error\": %v}", e.Status, rec.Body, keys, want)
		}
		if (e.RetryAfter > 0) != (rec.Header().Get("Retry-After") != "") {
			t.Errorf("%d: Retry-After header %q for RetryAfter %v", e.Status, rec.Header().Get("Retry-After"), e.RetryAfter)
		}
	}
}

// TestNewNamesABadAddress: a listen address without a port is reported as such, not as "not
// a loopback address".
func TestNewNamesABadAddress(t *testing.T) {
	for _, c := range []config.Serve{
		{Addr: "nonsense"},
		{Addr: "127.0.0.1"},
		{Addr: "127.0.0.1:8780", WyomingASRAddr: "localhost"},
		{Addr: "127.0.0.1:8780", WyomingTTSAddr: "10200"},
	} {
		_, err := New(Options{Config: c})
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "host:port") {
			t.Errorf("%+v: %v, want ErrConfig saying host:port", c, err)
		}
	}
}
