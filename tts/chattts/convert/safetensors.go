package convert

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
)

// ErrRelease wraps every problem with the files of a release.
var ErrRelease = errors.New("chattts release")

// maxHeader bounds a safetensors header (the official files' are a few hundred KB).
const maxHeader = 64 << 20

// tensorInfo is one entry of a safetensors header.
type tensorInfo struct {
	DType   string  `json:"dtype"`
	Shape   []int64 `json:"shape"`
	Offsets [2]int64
}

// safetensors is an open .safetensors file: its header read, its data read on demand.
type safetensors struct {
	path    string
	f       *os.File
	base    int64 // where the data starts
	tensors map[string]tensorInfo
}

func openSafetensors(path string) (*safetensors, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRelease, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %w", ErrRelease, err)
	}
	s, err := parseSafetensors(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.f = f
	return s, nil
}

// parseSafetensors reads and checks the header of a size-byte safetensors file.
func parseSafetensors(r io.ReaderAt, size int64, path string) (*safetensors, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrRelease, path, fmt.Sprintf(format, a...))
	}
	var head [8]byte
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return nil, bad("too short for a safetensors file (%d bytes)", size)
	}
	n := binary.LittleEndian.Uint64(head[:])
	if n > maxHeader || int64(n) > size-8 {
		return nil, bad("header of %d bytes does not fit the file (%d bytes)", n, size)
	}
	hb := make([]byte, n)
	if _, err := r.ReadAt(hb, 8); err != nil {
		return nil, bad("reading the header: %v", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hb, &raw); err != nil {
		return nil, bad("header is not a JSON object: %v", err)
	}
	s := &safetensors{path: path, base: 8 + int64(n), tensors: map[string]tensorInfo{}}
	dataLen := size - s.base
	for name, msg := range raw {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			DType   string  `json:"dtype"`
			Shape   []int64 `json:"shape"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil || len(e.Offsets) != 2 {
			return nil, bad("tensor %s: bad header entry %s", name, msg)
		}
		width := dtypeWidth(e.DType)
		if width == 0 {
			return nil, bad("tensor %s: unsupported dtype %q (want F32, F16 or BF16)", name, e.DType)
		}
		count := int64(1)
		for _, d := range e.Shape {
			if d < 0 || d > 1<<31 || (d > 0 && count > math.MaxInt64/8/d) {
				return nil, bad("tensor %s: shape %v", name, e.Shape)
			}
			count *= d
		}
		b, end := e.Offsets[0], e.Offsets[1]
		if b < 0 || end < b || end > dataLen || end-b != count*width {
			return nil, bad("tensor %s: bytes %d..%d do not hold %v %s in %d bytes of data", name, b, end, e.Shape, e.DType, dataLen)
		}
		s.tensors[name] = tensorInfo{DType: e.DType, Shape: e.Shape, Offsets: [2]int64{b, end}}
	}
	return s, nil
}

func dtypeWidth(dt string) int64 {
	switch dt {
	case "F32":
		return 4
	case "F16", "BF16":
		return 2
	}
	return 0
}

func (s *safetensors) Close() error { return s.f.Close() }

// names lists the tensors, sorted.
func (s *safetensors) names() []string {
	out := make([]string, 0, len(s.tensors))
	for k := range s.tensors {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// float32s reads a tensor as float32 (F16 and BF16 widened), refusing NaN and Inf.
func (s *safetensors) float32s(name string) ([]float32, error) {
	t, ok := s.tensors[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s has no tensor %s", ErrRelease, s.path, name)
	}
	b := make([]byte, t.Offsets[1]-t.Offsets[0])
	if _, err := s.f.ReadAt(b, s.base+t.Offsets[0]); err != nil {
		return nil, fmt.Errorf("%w: %s: tensor %s: %v", ErrRelease, s.path, name, err)
	}
	out := make([]float32, len(b)/int(dtypeWidth(t.DType)))
	for i := range out {
		switch t.DType {
		case "F32":
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		case "F16":
			out[i] = halfToFloat(binary.LittleEndian.Uint16(b[2*i:]))
		case "BF16":
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
		if f := float64(out[i]); math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%w: %s: tensor %s holds NaN or Inf", ErrRelease, s.path, name)
		}
	}
	return out, nil
}

// halfToFloat widens an IEEE 754 binary16 value.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		mant &= 0x3ff
		return math.Float32frombits(sign | e<<23 | mant<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}
