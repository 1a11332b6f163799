package audio

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
)

// SampleFormat is how one sample is stored as bytes (little-endian).
type SampleFormat int

const (
	U8    SampleFormat = iota + 1 // unsigned 8-bit, 128 = silence (WAV's 8-bit PCM)
	S16                           // signed 16-bit
	S24                           // signed 24-bit packed in 3 bytes
	S32                           // signed 32-bit
	F32                           // IEEE float 32-bit
	F64                           // IEEE float 64-bit
	MuLaw                         // ITU-T G.711 µ-law, 8 bits (telephone recordings, WAV tag 7)
	ALaw                          // ITU-T G.711 A-law, 8 bits (WAV tag 6)
)

// Size is the number of bytes one sample takes.
func (s SampleFormat) Size() int {
	switch s {
	case U8, MuLaw, ALaw:
		return 1
	case S16:
		return 2
	case S24:
		return 3
	case S32, F32:
		return 4
	case F64:
		return 8
	}
	return 0
}

// Float reports whether samples are stored as IEEE floats.
func (s SampleFormat) Float() bool { return s == F32 || s == F64 }

func (s SampleFormat) String() string {
	switch s {
	case U8:
		return "u8"
	case S16:
		return "s16le"
	case S24:
		return "s24le"
	case S32:
		return "s32le"
	case F32:
		return "f32le"
	case F64:
		return "f64le"
	case MuLaw:
		return "mulaw"
	case ALaw:
		return "alaw"
	}
	return fmt.Sprintf("SampleFormat(%d)", int(s))
}

// ParseSampleFormat accepts the names String returns (also "s16", "f32", "pcm16", …).
func ParseSampleFormat(name string) (SampleFormat, error) {
	switch name {
	case "u8", "pcm8":
		return U8, nil
	case "s16le", "s16", "pcm16", "int16":
		return S16, nil
	case "s24le", "s24", "pcm24", "int24":
		return S24, nil
	case "s32le", "s32", "pcm32", "int32":
		return S32, nil
	case "f32le", "f32", "float32", "float":
		return F32, nil
	case "f64le", "f64", "float64":
		return F64, nil
	case "mulaw", "ulaw", "u-law", "pcmu":
		return MuLaw, nil
	case "alaw", "a-law", "pcma":
		return ALaw, nil
	}
	return 0, fmt.Errorf("%w: unknown sample format %q", ErrUnsupported, name)
}

// DecodePCM converts whole samples from b into dst (as many as both hold) and returns the
// number converted. Integer formats scale by 2^(bits-1), so full scale maps to [-1, 1).
func DecodePCM(dst []float32, b []byte, s SampleFormat) int {
	size := s.Size()
	if size == 0 {
		return 0
	}
	n := len(b) / size
	if n > len(dst) {
		n = len(dst)
	}
	switch s {
	case U8:
		for i := 0; i < n; i++ {
			dst[i] = (float32(b[i]) - 128) / 128
		}
	case S16:
		for i := 0; i < n; i++ {
			dst[i] = float32(int16(binary.LittleEndian.Uint16(b[2*i:]))) / 32768
		}
	case S24:
		for i := 0; i < n; i++ {
			v := int32(uint32(b[3*i])<<8|uint32(b[3*i+1])<<16|uint32(b[3*i+2])<<24) >> 8
			dst[i] = float32(v) / 8388608
		}
	case S32:
		for i := 0; i < n; i++ {
			dst[i] = float32(float64(int32(binary.LittleEndian.Uint32(b[4*i:]))) / 2147483648)
		}
	case F32:
		for i := 0; i < n; i++ {
			dst[i] = sanitize(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
	case F64:
		for i := 0; i < n; i++ {
			dst[i] = sanitize(float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))))
		}
	case MuLaw, ALaw:
		t := g711[s].decode
		for i := 0; i < n; i++ {
			dst[i] = t[b[i]]
		}
	}
	return n
}

// g711Table is one G.711 law: each code's value, and the codes sorted by value for encoding.
type g711Table struct {
	decode [256]float32
	codes  [256]byte // codes in increasing order of value
}

var g711 = map[SampleFormat]*g711Table{MuLaw: newG711(muLawValue), ALaw: newG711(aLawValue)}

func newG711(value func(byte) int) *g711Table {
	t := &g711Table{}
	for c := 0; c < 256; c++ {
		t.decode[c] = float32(value(byte(c))) / 32768
		t.codes[c] = byte(c)
	}
	// by value; of µ-law's two zeros the positive one (0xFF) first, the code for silence
	sort.Slice(t.codes[:], func(i, j int) bool {
		a, b := t.codes[i], t.codes[j]
		return t.decode[a] < t.decode[b] || (t.decode[a] == t.decode[b] && a > b)
	})
	return t
}

// muLawValue is G.711's µ-law expansion of a code to 16-bit linear (±32124).
func muLawValue(c byte) int {
	u := ^c
	v := (int(u&0x0F)<<3 + 0x84) << ((u & 0x70) >> 4)
	if u&0x80 != 0 {
		return 0x84 - v
	}
	return v - 0x84
}

// aLawValue is G.711's A-law expansion of a code to 16-bit linear (±32256).
func aLawValue(c byte) int {
	a := c ^ 0x55
	v := int(a&0x0F) << 4
	switch seg := (a & 0x70) >> 4; seg {
	case 0:
		v += 8
	case 1:
		v += 0x108
	default:
		v = (v + 0x108) << (seg - 1)
	}
	if a&0x80 != 0 {
		return v
	}
	return -v
}

// encode is the code whose value is nearest v (the higher of two at a tie); NaN is silence.
func (t *g711Table) encode(v float32) byte {
	if v != v {
		v = 0
	}
	i := sort.Search(256, func(i int) bool { return t.decode[t.codes[i]] >= v })
	switch {
	case i == 256:
		return t.codes[255]
	case i > 0 && v-t.decode[t.codes[i-1]] < t.decode[t.codes[i]]-v:
		return t.codes[i-1]
	}
	return t.codes[i]
}

// sanitize maps NaN to 0 and ±Inf to ±1 so that hostile float files cannot poison filters.
func sanitize(v float32) float32 {
	if v != v {
		return 0
	}
	if v > math.MaxFloat32 {
		return 1
	}
	if v < -math.MaxFloat32 {
		return -1
	}
	return v
}

// EncodePCM appends src encoded as s to dst. Integer formats clip to full scale and round to
// nearest, so DecodePCM∘EncodePCM is exact for integer data; G.711 takes the nearest code.
func EncodePCM(dst []byte, src []float32, s SampleFormat) []byte {
	size := s.Size()
	start := len(dst)
	need := start + len(src)*size
	if cap(dst) < need {
		nd := make([]byte, start, need)
		copy(nd, dst)
		dst = nd
	}
	dst = dst[:need]
	out := dst[start:]
	switch s {
	case U8:
		for i, v := range src {
			out[i] = uint8(quantize(v, 128) + 128)
		}
	case S16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(out[2*i:], uint16(int16(quantize(v, 32768))))
		}
	case S24:
		for i, v := range src {
			q := quantize(v, 8388608)
			out[3*i] = byte(q)
			out[3*i+1] = byte(q >> 8)
			out[3*i+2] = byte(q >> 16)
		}
	case S32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(out[4*i:], uint32(quantize(v, 2147483648)))
		}
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
	case F64:
		for i, v := range src {
			binary.LittleEndian.PutUint64(out[8*i:], math.Float64bits(float64(v)))
		}
	case MuLaw, ALaw:
		t := g711[s]
		for i, v := range src {
			out[i] = t.encode(v)
		}
	default:
		return dst[:start]
	}
	return dst
}

// quantize scales v by full and rounds, clipping to [-full, full-1].
func quantize(v float32, full float64) int32 {
	x := math.Round(float64(v) * full)
	if x >= full-1 {
		return int32(full - 1)
	}
	if x <= -full || x != x {
		if x != x {
			return 0
		}
		return int32(-full)
	}
	return int32(x)
}
