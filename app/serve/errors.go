package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors.
var (
	// ErrConfig is wrapped by configuration errors (for example a non-loopback address
	// without an API key).
	ErrConfig = errors.New("serve: bad configuration")
	// ErrBusy is returned when an engine's queue is full.
	ErrBusy = errors.New("serve: busy")
	// ErrShuttingDown is returned for a job the server will not run because it is
	// shutting down (Limiter.Drain).
	ErrShuttingDown = errors.New("serve: shutting down")
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

// missingParam is OpenAI's 400 for a required parameter left out.
func missingParam(param, format string, a ...any) *APIError {
	return invalidCode(param, "missing_required_parameter", format, a...)
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
	return &APIError{Status: http.StatusInternalServerError, Type: "server_error", Code: str("internal_error"), Message: fmt.Sprintf(format, a...)}
}

// shuttingDown is the 503 of work the server will not do because it is stopping: work
// queued that would not finish in the drain, or work cut at its end. Retry-After says when a
// restarted server may take it.
func shuttingDown(retry time.Duration) *APIError {
	return &APIError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: str("server_shutting_down"), RetryAfter: retry,
		Message: fmt.Sprintf("the server is shutting down and will not finish this request; retry after %d s", int(retry.Seconds()+0.999))}
}

// gone is the 499 of a client that left before its answer (logged, never seen by it).
func gone(msg string) *APIError {
	return &APIError{Status: statusClientClosed, Type: "invalid_request_error", Code: str("client_closed_request"), Message: msg}
}

// timedOut is a 504 for a job that ran past the server's job timeout.
func timedOut(msg string) *APIError {
	return &APIError{Status: http.StatusGatewayTimeout, Type: "server_error", Code: str("timeout"), Message: msg}
}

// statusClientClosed is nginx's 499: the client closed the request.
const statusClientClosed = 499

// statusCodes name the status of an error that was given no code of its own: every error
// carries one, as OpenAI's 4xx do, so clients can branch on it.
var statusCodes = map[int]string{
	http.StatusBadRequest: "invalid_value", http.StatusUnauthorized: "invalid_api_key", http.StatusNotFound: "not_found",
	http.StatusMethodNotAllowed: "method_not_allowed", http.StatusRequestTimeout: "request_timeout",
	http.StatusRequestEntityTooLarge: "request_too_large", http.StatusTooManyRequests: "rate_limit_exceeded",
	statusClientClosed: "client_closed_request", http.StatusInternalServerError: "internal_error",
	http.StatusNotImplemented: "not_implemented", http.StatusBadGateway: "upstream_error",
	http.StatusServiceUnavailable: "engine_unavailable", http.StatusGatewayTimeout: "timeout",
}

// writeError writes e as OpenAI's error JSON.
func writeError(w http.ResponseWriter, e *APIError) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(e.RetryAfter.Seconds()+0.999)))
	}
	if e.Code == nil {
		c, ok := statusCodes[e.Status]
		if !ok {
			c = strings.ToLower(strings.ReplaceAll(http.StatusText(e.Status), " ", "_"))
		}
		if c == "" {
			c = "error"
		}
		e.Code = &c
	}
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(struct {
		Error *APIError `json:"error"`
	}{e})
}
