package voices

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
)

// Speaker strings carry an embedding as text, the way ChatTTS users pass speakers around:
//
//	"spk1:" + base64url( "PS" 0x01 0x00 | count uint32 LE | count × float16 LE | crc32 LE )
//
// float16 halves the size (ChatTTS stores its speaker embeddings as float16 too); the CRC
// catches truncation and typos.
const (
	speakerPrefix   = "spk1:"
	MaxSpeakerFloat = 8192 * 4 // at most a 4-row Kokoro pack or a few ChatTTS embeddings
)

// DecodeAnySpeaker accepts either speaker string form: Parley's "spk1:" or ChatTTS's
// base16384 text.
func DecodeAnySpeaker(s string) ([]float32, error) {
	if IsChatTTSSpeaker(s) {
		return DecodeChatTTSSpeaker(s)
	}
	return DecodeSpeaker(s)
}

// EncodeSpeaker renders an embedding as a speaker string. Values are rounded to float16.
func EncodeSpeaker(v []float32) string {
	b := make([]byte, 8, 8+2*len(v)+4)
	copy(b, "PS\x01\x00")
	binary.LittleEndian.PutUint32(b[4:], uint32(len(v)))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, toHalf(x))
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	return speakerPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// DecodeSpeaker parses a speaker string, checking its length, checksum and values.
func DecodeSpeaker(s string) ([]float32, error) {
	s = strings.TrimSpace(s)
	body, ok := strings.CutPrefix(s, speakerPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: speaker string must start with %q", ErrInvalid, speakerPrefix)
	}
	if len(body) > base64.RawURLEncoding.EncodedLen(12+2*MaxSpeakerFloat) {
		return nil, fmt.Errorf("%w: speaker string too long", ErrInvalid)
	}
	b, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return nil, fmt.Errorf("%w: speaker string: %v", ErrInvalid, err)
	}
	if len(b) < 12 || string(b[:4]) != "PS\x01\x00" {
		return nil, fmt.Errorf("%w: speaker string: bad header", ErrInvalid)
	}
	n := binary.LittleEndian.Uint32(b[4:8])
	if n == 0 || n > MaxSpeakerFloat || len(b) != 8+2*int(n)+4 {
		return nil, fmt.Errorf("%w: speaker string: %d values do not fit %d bytes", ErrInvalid, n, len(b))
	}
	if crc32.ChecksumIEEE(b[:len(b)-4]) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, fmt.Errorf("%w: speaker string: checksum mismatch (truncated or mistyped?)", ErrInvalid)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = fromHalf(binary.LittleEndian.Uint16(b[8+2*i:]))
		if math.IsNaN(float64(out[i])) || math.IsInf(float64(out[i]), 0) {
			return nil, fmt.Errorf("%w: speaker string: value %d is NaN or Inf", ErrInvalid, i)
		}
	}
	return out, nil
}

// RoundHalf rounds x to the nearest float16 value (what a speaker string stores), saturating
// to ±Inf past float16's range.
func RoundHalf(x float32) float32 { return fromHalf(toHalf(x)) }

// toHalf converts to IEEE binary16 with round-to-nearest-even; out-of-range values saturate
// to ±Inf (which DecodeSpeaker then rejects), NaN stays NaN.
func toHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN
		return sign | 0x7e00
	case exp >= 31:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		h := uint16(mant >> shift)
		if rem := mant & (1<<shift - 1); rem > 1<<(shift-1) || (rem == 1<<(shift-1) && h&1 == 1) {
			h++
		}
		return sign | h
	}
	h := sign | uint16(exp)<<10 | uint16(mant>>13)
	if rem := mant & 0x1fff; rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // may carry into the exponent, which is correct rounding
	}
	return h
}

func fromHalf(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		f := float32(mant) * float32(math.Ldexp(1, -24))
		if sign != 0 {
			f = -f
		}
		return f
	case 31:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}
