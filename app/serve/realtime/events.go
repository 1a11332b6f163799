// Package realtime is a voice session in the shape of OpenAI's Realtime API: the client
// streams base64 PCM16 audio at 24 kHz (input_audio_buffer.append), the server detects
// speech (server VAD), transcribes each utterance, answers with the brain and streams the
// spoken answer back as base64 PCM16 at 24 kHz, with its transcript. Speaking over an
// answer cancels it (barge-in). The transport is abstracted (Conn) so sessions run over a
// WebSocket in the server and over channels in tests.
package realtime

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// Rate is the sample rate of audio on the wire (OpenAI's pcm16 / audio/pcm).
const Rate = 24000

// ErrEvent is wrapped by client event decoding errors.
var ErrEvent = errors.New("realtime: bad event")

// Client event types.
const (
	SessionUpdate            = "session.update"
	InputAudioAppend         = "input_audio_buffer.append"
	InputAudioCommit         = "input_audio_buffer.commit"
	InputAudioClear          = "input_audio_buffer.clear"
	ResponseCreate           = "response.create"
	ResponseCancel           = "response.cancel"
	ConversationItemCreate   = "conversation.item.create"
	ConversationItemTruncate = "conversation.item.truncate"
)

// TurnDetection configures server VAD. A nil *TurnDetection in a session means manual
// turns (the client commits).
type TurnDetection struct {
	Type              string   `json:"type"` // server_vad
	Threshold         *float64 `json:"threshold,omitempty"`
	PrefixPaddingMS   *int     `json:"prefix_padding_ms,omitempty"`
	SilenceDurationMS *int     `json:"silence_duration_ms,omitempty"`
	CreateResponse    *bool    `json:"create_response,omitempty"`
	InterruptResponse *bool    `json:"interrupt_response,omitempty"`
}

// SessionConfig is the part of OpenAI's session object Parley honours. Both the GA shape
// (audio.input.turn_detection, audio.output.voice, output_modalities) and the beta shape
// (turn_detection, voice, modalities) are read.
type SessionConfig struct {
	Type         string          `json:"type,omitempty"`
	Instructions *string         `json:"instructions,omitempty"`
	Voice        *string         `json:"voice,omitempty"`
	Modalities   []string        `json:"modalities,omitempty"`
	OutputMods   []string        `json:"output_modalities,omitempty"`
	TurnDetect   json.RawMessage `json:"turn_detection,omitempty"`
	InputFormat  json.RawMessage `json:"input_audio_format,omitempty"`
	OutputFormat json.RawMessage `json:"output_audio_format,omitempty"`
	Audio        *struct {
		Input *struct {
			Format        json.RawMessage `json:"format,omitempty"`
			TurnDetection json.RawMessage `json:"turn_detection,omitempty"`
		} `json:"input,omitempty"`
		Output *struct {
			Format json.RawMessage `json:"format,omitempty"`
			Voice  *string         `json:"voice,omitempty"`
			Speed  *float64        `json:"speed,omitempty"`
		} `json:"output,omitempty"`
	} `json:"audio,omitempty"`
}

// ContentPart is one part of a conversation item.
type ContentPart struct {
	Type       string `json:"type"`
	Text       string `json:"text,omitempty"`
	Transcript string `json:"transcript,omitempty"`
}

// Item is a conversation item.
type Item struct {
	ID      string        `json:"id,omitempty"`
	Object  string        `json:"object,omitempty"`
	Type    string        `json:"type"`
	Status  string        `json:"status,omitempty"`
	Role    string        `json:"role,omitempty"`
	Content []ContentPart `json:"content"`
}

// ClientEvent is a decoded client event.
type ClientEvent struct {
	Type     string          `json:"type"`
	EventID  string          `json:"event_id,omitempty"`
	Session  *SessionConfig  `json:"session,omitempty"`
	Audio    string          `json:"audio,omitempty"`
	Response json.RawMessage `json:"response,omitempty"`
	Item     *Item           `json:"item,omitempty"`
	// conversation.item.truncate
	ItemID       string `json:"item_id,omitempty"`
	ContentIndex int    `json:"content_index,omitempty"`
	AudioEndMS   *int64 `json:"audio_end_ms,omitempty"`

	// PCM is Audio decoded (append only).
	PCM []byte `json:"-"`
}

// MaxMessageBytes is the largest client event, OpenAI's own limit (15 MiB): "send the whole
// clip in one append" is common. The server holds a message against its audio memory budget
// while it is read and decoded.
const MaxMessageBytes = 15 << 20

// MaxAppendBytes bounds the decoded audio of one append: what a MaxMessageBytes event of
// base64 holds (11.25 MiB, about 4 minutes at 24 kHz).
const MaxAppendBytes = MaxMessageBytes / 4 * 3

// DecodeClientEvent parses one client message. Unknown types are returned as they are (the
// session answers them with an error event); malformed JSON, a missing type and bad audio
// are ErrEvent.
func DecodeClientEvent(b []byte) (*ClientEvent, error) {
	var e ClientEvent
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("%w: not a JSON event object: %v", ErrEvent, err)
	}
	if e.Type == "" {
		return &e, fmt.Errorf("%w: missing 'type'", ErrEvent)
	}
	switch e.Type {
	case InputAudioAppend:
		if e.Audio == "" {
			return &e, fmt.Errorf("%w: input_audio_buffer.append needs 'audio' (base64 PCM16)", ErrEvent)
		}
		if base64.StdEncoding.DecodedLen(len(e.Audio)) > MaxAppendBytes {
			return &e, fmt.Errorf("%w: 'audio' is larger than %d bytes", ErrEvent, MaxAppendBytes)
		}
		pcm, err := base64.StdEncoding.DecodeString(e.Audio)
		if err != nil {
			return &e, fmt.Errorf("%w: 'audio' is not valid base64: %v", ErrEvent, err)
		}
		if len(pcm)%2 != 0 {
			return &e, fmt.Errorf("%w: 'audio' holds %d bytes, not whole 16-bit samples", ErrEvent, len(pcm))
		}
		e.PCM, e.Audio = pcm, ""
	case SessionUpdate:
		if e.Session == nil {
			return &e, fmt.Errorf("%w: session.update needs 'session'", ErrEvent)
		}
	case ConversationItemCreate:
		if e.Item == nil {
			return &e, fmt.Errorf("%w: conversation.item.create needs 'item'", ErrEvent)
		}
	case ConversationItemTruncate:
		if e.ItemID == "" || e.AudioEndMS == nil || *e.AudioEndMS < 0 {
			return &e, fmt.Errorf("%w: conversation.item.truncate needs 'item_id' and a non-negative 'audio_end_ms'", ErrEvent)
		}
	}
	return &e, nil
}

// turnDetection reads the session's turn detection: set is false when the update does not
// mention it; td is nil for manual turns (null).
func (c *SessionConfig) turnDetection() (td *TurnDetection, set bool, err error) {
	raw := c.TurnDetect
	if c.Audio != nil && c.Audio.Input != nil && len(c.Audio.Input.TurnDetection) > 0 {
		raw = c.Audio.Input.TurnDetection
	}
	if len(raw) == 0 {
		return nil, false, nil
	}
	if string(raw) == "null" {
		return nil, true, nil
	}
	var t TurnDetection
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, true, fmt.Errorf("turn_detection: %v", err)
	}
	switch t.Type {
	case "server_vad", "":
		t.Type = "server_vad"
	case "semantic_vad":
		t.Type = "server_vad" // served by the same detector
	default:
		return nil, true, fmt.Errorf("turn_detection.type %q is not supported (server_vad, or null for manual turns)", t.Type)
	}
	return &t, true, nil
}

// checkFormat accepts PCM16 at 24 kHz in either shape ("pcm16" or {"type":"audio/pcm","rate":24000}).
func checkFormat(raw json.RawMessage, param string) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "pcm16" {
			return nil
		}
		return fmt.Errorf("%s %q is not supported: Parley speaks pcm16 at 24 kHz", param, s)
	}
	var f struct {
		Type string `json:"type"`
		Rate int    `json:"rate"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return fmt.Errorf("%s: %v", param, err)
	}
	if f.Type != "audio/pcm" || (f.Rate != 0 && f.Rate != Rate) {
		return fmt.Errorf("%s {type %q, rate %d} is not supported: Parley speaks audio/pcm at 24000 Hz", param, f.Type, f.Rate)
	}
	return nil
}
