// Package wyoming speaks Home Assistant's Wyoming protocol: events on a byte stream, each
// one JSON header line ({"type", "data", "data_length", "payload_length", "version"}), then
// data_length bytes of JSON data merged over the header's data, then payload_length bytes of
// payload. It has the framing (with limits, so a lying or huge length is an error and never
// an allocation), a small client and the ASR/TTS server.
package wyoming

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Version is the protocol version written in every header.
const Version = "1.7.2"

// ErrFrame is wrapped by every framing error (malformed or over a limit).
var ErrFrame = errors.New("wyoming: bad frame")

// Limits bound what ReadEvent accepts.
type Limits struct {
	MaxLine    int // header line bytes; default 64 KiB
	MaxData    int // data_length; default 1 MiB
	MaxPayload int // payload_length; default 4 MiB
}

// NewReader returns a buffered reader sized for lim's header lines.
func NewReader(r io.Reader, lim Limits) *bufio.Reader {
	return bufio.NewReaderSize(r, lim.withDefaults().MaxLine)
}

func (l Limits) withDefaults() Limits {
	if l.MaxLine <= 0 {
		l.MaxLine = 64 << 10
	}
	if l.MaxData <= 0 {
		l.MaxData = 1 << 20
	}
	if l.MaxPayload <= 0 {
		l.MaxPayload = 4 << 20
	}
	return l
}

// Event is one protocol event.
type Event struct {
	Type    string
	Data    map[string]json.RawMessage
	Payload []byte
}

// NewEvent builds an event whose data is v marshalled (a struct or map), or nil.
func NewEvent(typ string, v any) *Event {
	e := &Event{Type: typ}
	if v != nil {
		b, err := json.Marshal(v)
		if err == nil {
			json.Unmarshal(b, &e.Data)
		}
	}
	return e
}

// Decode unmarshals the event's data into v.
func (e *Event) Decode(v any) error {
	if len(e.Data) == 0 {
		return nil
	}
	b, err := json.Marshal(e.Data)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s data: %v", ErrFrame, e.Type, err)
	}
	return nil
}

type header struct {
	Type          *string                    `json:"type"`
	Data          map[string]json.RawMessage `json:"data"`
	DataLength    json.RawMessage            `json:"data_length"`
	PayloadLength json.RawMessage            `json:"payload_length"`
}

// length reads an optional non-negative integer length bounded by max.
func length(raw json.RawMessage, name string, max int) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %s is not an integer", ErrFrame, name, raw)
	}
	if n < 0 {
		return 0, fmt.Errorf("%w: %s %d is negative", ErrFrame, name, n)
	}
	if n > int64(max) {
		return 0, fmt.Errorf("%w: %s %d is over the limit of %d bytes", ErrFrame, name, n, max)
	}
	return int(n), nil
}

// ReadEvent reads one event. Give it a reader of at most Limits.MaxLine bytes of buffer (see
// NewReader) so that a header line without a newline is refused as soon as it is too long. io.EOF means the stream ended cleanly between events; any
// other error (ErrFrame for malformed or oversized frames, io.ErrUnexpectedEOF for a
// stream cut inside an event) means the connection cannot go on.
func ReadEvent(r *bufio.Reader, lim Limits) (*Event, error) { return readEvent(r, lim, nil) }

// readEvent is ReadEvent with a hook called once the header line is in and its data and
// payload are still to come (the server shortens its read deadline there).
func readEvent(r *bufio.Reader, lim Limits, afterHeader func(dataLen, payloadLen int)) (*Event, error) {
	lim = lim.withDefaults()
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > lim.MaxLine || (errors.Is(err, bufio.ErrBufferFull) && len(line) >= lim.MaxLine) {
			return nil, fmt.Errorf("%w: header line longer than %d bytes", ErrFrame, lim.MaxLine)
		}
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			if len(bytes.TrimSpace(line)) == 0 {
				return nil, io.EOF
			}
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, fmt.Errorf("%w: empty header line", ErrFrame)
	}
	var h header
	if err := json.Unmarshal(line, &h); err != nil {
		return nil, fmt.Errorf("%w: header is not a JSON object: %v", ErrFrame, err)
	}
	if h.Type == nil || *h.Type == "" {
		return nil, fmt.Errorf("%w: header has no type", ErrFrame)
	}
	dl, err := length(h.DataLength, "data_length", lim.MaxData)
	if err != nil {
		return nil, err
	}
	pl, err := length(h.PayloadLength, "payload_length", lim.MaxPayload)
	if err != nil {
		return nil, err
	}
	e := &Event{Type: *h.Type, Data: h.Data}
	if afterHeader != nil && dl+pl > 0 {
		afterHeader(dl, pl)
	}
	if dl > 0 {
		b := make([]byte, dl)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, cut(err, "data")
		}
		var more map[string]json.RawMessage
		if err := json.Unmarshal(b, &more); err != nil {
			return nil, fmt.Errorf("%w: data is not a JSON object: %v", ErrFrame, err)
		}
		if e.Data == nil {
			e.Data = more
		} else {
			for k, v := range more {
				e.Data[k] = v
			}
		}
	}
	if pl > 0 {
		e.Payload = make([]byte, pl)
		if _, err := io.ReadFull(r, e.Payload); err != nil {
			return nil, cut(err, "payload")
		}
	}
	return e, nil
}

func cut(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: stream ended inside the %s: %w", ErrFrame, what, io.ErrUnexpectedEOF)
	}
	return err
}

// AppendEvent appends e's wire form to b: the header line with version, data_length and
// payload_length, then the data, then the payload (as the Python reference writes it).
func AppendEvent(b []byte, e *Event) ([]byte, error) {
	var data []byte
	if len(e.Data) > 0 {
		var err error
		if data, err = json.Marshal(e.Data); err != nil {
			return b, err
		}
	}
	h := struct {
		Type          string `json:"type"`
		Version       string `json:"version"`
		DataLength    int    `json:"data_length,omitempty"`
		PayloadLength int    `json:"payload_length,omitempty"`
	}{e.Type, Version, len(data), len(e.Payload)}
	hb, err := json.Marshal(h)
	if err != nil {
		return b, err
	}
	b = append(b, hb...)
	b = append(b, '\n')
	b = append(b, data...)
	return append(b, e.Payload...), nil
}

// WriteEvent writes one event in a single Write.
func WriteEvent(w io.Writer, e *Event) error {
	b, err := AppendEvent(nil, e)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
