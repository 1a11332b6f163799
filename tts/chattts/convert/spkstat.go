package convert

import (
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"strings"
)

// decodeBase16384 decodes base16384 (as pybase16384, which ChatTTS uses for speaker strings and
// its spk_stat): 14 bits per character from U+4E00..U+8DFF, a big-endian bit stream; a final
// U+3D01..U+3D06 gives the byte count mod 7.
func decodeBase16384(s string) ([]byte, error) {
	rs := []rune(strings.TrimSpace(s))
	rem := 0
	if n := len(rs); n > 0 && rs[n-1] > 0x3D00 && rs[n-1] <= 0x3D06 {
		rem = int(rs[n-1] - 0x3D00)
		rs = rs[:n-1]
	}
	var acc uint32
	bits := 0
	out := make([]byte, 0, len(rs)*14/8)
	for i, r := range rs {
		if r < 0x4E00 || r > 0x8DFF {
			return nil, fmt.Errorf("base16384: character %d (U+%04X) outside U+4E00..U+8DFF", i, r)
		}
		acc = acc<<14 | uint32(r-0x4E00)
		bits += 14
		for bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
		acc &= 1<<bits - 1
	}
	full := len(rs) / 4 * 7
	if rem != 0 {
		full = (len(rs) - (8*rem+13)/14) / 4 * 7
	}
	n := full + rem
	if n < 0 || len(out) < n {
		return nil, fmt.Errorf("base16384: %d characters hold fewer than %d bytes", len(rs), n)
	}
	return out[:n], nil
}

var spkStatRe = regexp.MustCompile(`spk_stat\s*:\s*str\s*=\s*\(\s*"([^"]+)"`)

// parseSpkStat reads ChatTTS's speaker statistics (std then mean, hidden values each) from
// ChatTTS/config/config.py, which holds them as a base16384 string of float16 values, or from a
// file holding just that string.
func parseSpkStat(name, text string, hidden int) ([]float32, error) {
	s := text
	if m := spkStatRe.FindStringSubmatch(text); m != nil {
		s = m[1]
	}
	raw, err := decodeBase16384(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: spk_stat: %v", ErrRelease, name, err)
	}
	if len(raw)%2 != 0 {
		return nil, fmt.Errorf("%w: %s: spk_stat holds %d bytes, not float16 values", ErrRelease, name, len(raw))
	}
	v := make([]float32, len(raw)/2)
	for i := range v {
		v[i] = halfToFloat(binary.LittleEndian.Uint16(raw[2*i:]))
	}
	if len(v) != 2*hidden {
		return nil, fmt.Errorf("%w: %s: spk_stat has %d values, want %d (std and mean of %d)", ErrRelease, name, len(v), 2*hidden, hidden)
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || (i < hidden && x < 0) {
			return nil, fmt.Errorf("%w: %s: spk_stat has NaN/Inf or negative std values", ErrRelease, name)
		}
	}
	return v, nil
}
