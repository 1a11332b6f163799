package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Sentinel errors.
var (
	// ErrConfig is wrapped by configuration errors (for example a non-loopback address
	// without an API key).
	ErrConfig = errors.New("serve: bad configuration")
	// ErrBusy is returned when an engine's queue is full.
	ErrBusy = errors.New("serve: busy")
)

// APIError is an error in OpenAI's shape: {"error":{"message","type","param","code"}}.
type APIError struct {
	Status     int           `json:"-"`
	Message    string        `json:"message"`
	Type       string        `json:"type"`
	Param      *string       `json:"param"`
	Code       *string       `json:"code"`
	RetryAfter time.Duration `json:"-"` // sent as the Retry-After header
}

func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message) }

func str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// invalid is a 400 invalid_request_error about param.
func invalid(param, format string, a ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: str(param), Message: fmt.Sprintf(format, a...)}
}

func invalidCode(param, code, format string, a ...any) *APIError {
	e := invalid(param, format, a...)
	e.Code = str(code)
	return e
}

func modelNotFound(model string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: str("model"), Code: str("model_not_found"),
		Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model)}
}

func tooLarge(format string, a ...any) *APIError {
	return &APIError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: str("request_too_large"), Message: fmt.Sprintf(format, a...)}
}

func busy(engine string, retry time.Duration) *APIError {
	return &APIError{Status: http.StatusTooManyRequests, Type: "requests", Code: str("rate_limit_exceeded"), RetryAfter: retry,
		Message: fmt.Sprintf("the %s engine is busy and its queue is full; retry after %d s", engine, int(retry.Seconds()+0.999))}
}

func unavailable(format string, a ...any) *APIError {
	return &APIError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: str("engine_unavailable"), Message: fmt.Sprintf(format, a...)}
}

func internal(format string, a ...any) *APIError {
	return &APIError{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf(format, a...)}
}

// writeError writes e as OpenAI's error JSON.
func writeError(w http.ResponseWriter, e *APIError) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(e.RetryAfter.Seconds()+0.999)))
	}
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(struct {
		Error *APIError `json:"error"`
	}{e})
}
