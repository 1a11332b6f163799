package convert

import (
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/parley-voice/parley/voices"
)

var spkStatRe = regexp.MustCompile(`spk_stat\s*:\s*str\s*=\s*\(\s*"([^"]+)"`)

// parseSpkStat reads ChatTTS's speaker statistics (std then mean, hidden values each) from
// ChatTTS/config/config.py, which holds them as a base16384 string of float16 values, or from a
// file holding just that string.
func parseSpkStat(name, text string, hidden int) ([]float32, error) {
	s := text
	if m := spkStatRe.FindStringSubmatch(text); m != nil {
		s = m[1]
	}
	raw, err := voices.DecodeBase16384(strings.TrimSpace(s))
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
