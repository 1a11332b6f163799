package voices

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/ulikunitz/xz/lzma"
)

// ChatTTS speaker strings are what ChatTTS's sample_random_speaker() returns and its infer()
// takes as spk_emb: the speaker embedding as float16 little-endian bytes, compressed as a raw
// LZMA2 stream (preset 9 | extreme), written in base16384 (14 bits per CJK character
// U+4E00–U+8DFF, the byte count mod 7 in a final U+3D01–U+3D06).

const (
	b14Base   = 0x4E00
	b14Max    = 0x8DFF
	b14Marker = 0x3D00
	// MaxChatTTSString bounds the input (a 768-float speaker is ~1 000 characters).
	MaxChatTTSString = 64 << 10
)

// IsChatTTSSpeaker reports whether s looks like a ChatTTS speaker string (base16384 text).
func IsChatTTSSpeaker(s string) bool {
	r, _ := utf8.DecodeRuneInString(strings.TrimSpace(s))
	return r >= b14Base && r <= b14Max
}

// DecodeChatTTSSpeaker parses a ChatTTS speaker string into its embedding.
func DecodeChatTTSSpeaker(s string) ([]float32, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxChatTTSString {
		return nil, fmt.Errorf("%w: ChatTTS speaker string longer than %d bytes", ErrInvalid, MaxChatTTSString)
	}
	raw, err := decodeB14(s)
	if err != nil {
		return nil, err
	}
	zr, err := lzma.Reader2Config{DictCap: 1 << 20}.NewReader2(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: ChatTTS speaker string: %v", ErrInvalid, err)
	}
	b, err := io.ReadAll(io.LimitReader(zr, 2*MaxSpeakerFloat+1))
	if err != nil {
		return nil, fmt.Errorf("%w: ChatTTS speaker string: LZMA2: %v", ErrInvalid, err)
	}
	if len(b) == 0 || len(b)%2 != 0 || len(b) > 2*MaxSpeakerFloat {
		return nil, fmt.Errorf("%w: ChatTTS speaker string holds %d bytes, not a float16 vector", ErrInvalid, len(b))
	}
	out := make([]float32, len(b)/2)
	for i := range out {
		out[i] = fromHalf(binary.LittleEndian.Uint16(b[2*i:]))
		if math.IsNaN(float64(out[i])) || math.IsInf(float64(out[i]), 0) {
			return nil, fmt.Errorf("%w: ChatTTS speaker string: value %d is NaN or Inf", ErrInvalid, i)
		}
	}
	return out, nil
}

// EncodeChatTTSSpeaker renders an embedding as a ChatTTS speaker string (values rounded to
// float16) that ChatTTS itself can load.
func EncodeChatTTSSpeaker(v []float32) (string, error) {
	if len(v) == 0 || len(v) > MaxSpeakerFloat {
		return "", fmt.Errorf("%w: %d values", ErrInvalid, len(v))
	}
	raw := make([]byte, 0, 2*len(v))
	for _, x := range v {
		raw = binary.LittleEndian.AppendUint16(raw, toHalf(x))
	}
	var buf bytes.Buffer
	zw, err := lzma.Writer2Config{DictCap: 1 << 20}.NewWriter2(&buf)
	if err != nil {
		return "", err
	}
	if _, err := zw.Write(raw); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return encodeB14(buf.Bytes()), nil
}

// EncodeBase16384 is base16384 (pybase16384, ChatTTS's text form for speakers and its
// spk_stat). encodeB14 is base16384: the bytes as one big-endian bit stream cut into 14-bit groups (the
// last zero-padded), each written as U+4E00+group, then U+3D00+(len mod 7) when that is not 0.
func EncodeBase16384(b []byte) string { return encodeB14(b) }

func encodeB14(b []byte) string {
	var sb strings.Builder
	var acc uint32
	bits := 0
	for _, x := range b {
		acc = acc<<8 | uint32(x)
		bits += 8
		if bits >= 14 {
			bits -= 14
			sb.WriteRune(rune(b14Base + (acc>>bits)&0x3FFF))
		}
	}
	if bits > 0 {
		sb.WriteRune(rune(b14Base + (acc<<(14-bits))&0x3FFF))
	}
	if r := len(b) % 7; r != 0 {
		sb.WriteRune(rune(b14Marker + r))
	}
	return sb.String()
}

// DecodeBase16384 decodes base16384 (EncodeBase16384); errors wrap ErrInvalid.
func DecodeBase16384(s string) ([]byte, error) { return decodeB14(s) }

func decodeB14(s string) ([]byte, error) {
	rs := []rune(s)
	rem := 0
	if n := len(rs); n > 0 && rs[n-1] > b14Marker && rs[n-1] <= b14Marker+6 {
		rem = int(rs[n-1] - b14Marker)
		rs = rs[:n-1]
	}
	// a remainder of r bytes takes ceil(8r/14) characters after the 4-character groups
	want := (8*rem + 13) / 14
	if len(rs) < want || (len(rs)-want)%4 != 0 {
		return nil, fmt.Errorf("%w: base16384: %d characters do not fit a remainder of %d bytes", ErrInvalid, len(rs), rem)
	}
	full := (len(rs) - want) / 4
	out := make([]byte, 0, full*7+rem)
	var acc uint64
	bits := 0
	for i, r := range rs {
		if r < b14Base || r > b14Max {
			return nil, fmt.Errorf("%w: base16384: character %d (%U) outside U+4E00–U+8DFF", ErrInvalid, i, r)
		}
		acc = acc<<14 | uint64(r-b14Base)
		bits += 14
		for bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
		acc &= 1<<bits - 1
	}
	if n := full*7 + rem; len(out) >= n {
		out = out[:n]
	} else {
		return nil, fmt.Errorf("%w: base16384: truncated", ErrInvalid)
	}
	return out, nil
}
