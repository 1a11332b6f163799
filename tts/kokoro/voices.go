package kokoro

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Voice pack geometry: one 256-float style row per input length (in phoneme tokens).
const (
	StyleDim = 256
	PackRows = 510
	// MaxPackBytes bounds a voice file or archive read from disk.
	MaxPackBytes = 256 << 20
)

// ErrVoice is wrapped by voice pack errors.
var ErrVoice = errors.New("kokoro: bad voice pack")

// Pack is a Kokoro voice: Rows style vectors of StyleDim floats, row i used for inputs of i
// phoneme tokens.
type Pack struct {
	Name string
	Rows int
	Data []float32 // Rows × StyleDim
}

// Style returns the style row for an input of n phoneme tokens (clamped to the pack).
func (p *Pack) Style(n int) []float32 {
	r := max(0, min(n, p.Rows-1))
	return p.Data[r*StyleDim : (r+1)*StyleDim]
}

// FromArray makes a pack from an array of shape (R, 1, 256), (R, 256) or (256).
func FromArray(name string, a *Array) (*Pack, error) {
	sh := a.Shape
	var rows int
	switch {
	case len(sh) == 3 && sh[1] == 1 && sh[2] == StyleDim:
		rows = sh[0]
	case len(sh) == 2 && sh[1] == StyleDim:
		rows = sh[0]
	case len(sh) == 1 && sh[0] == StyleDim:
		rows = 1
	default:
		return nil, fmt.Errorf("%w: %s: shape %v (want (rows, 1, %d))", ErrVoice, name, sh, StyleDim)
	}
	return newPack(name, rows, a.Data)
}

func newPack(name string, rows int, data []float32) (*Pack, error) {
	if rows < 1 || rows > 4096 || len(data) != rows*StyleDim {
		return nil, fmt.Errorf("%w: %s: %d floats is not a whole number of %d-float rows", ErrVoice, name, len(data), StyleDim)
	}
	for i, v := range data {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("%w: %s: NaN or Inf at row %d", ErrVoice, name, i/StyleDim)
		}
	}
	return &Pack{Name: name, Rows: rows, Data: data}, nil
}

// ParseBin reads a raw little-endian float32 voice file (onnx-community voices/*.bin: 510×256).
func ParseBin(name string, b []byte) (*Pack, error) {
	if len(b)%(4*StyleDim) != 0 || len(b) == 0 {
		return nil, fmt.Errorf("%w: %s: %d bytes is not a whole number of %d-float rows", ErrVoice, name, len(b), StyleDim)
	}
	d := make([]float32, len(b)/4)
	for i := range d {
		d[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return newPack(name, len(d)/StyleDim, d)
}

// LoadPacks finds the voice packs installed with a model: <dir>/voices/*.bin and *.npy, and
// every .npz archive (or zip-format .bin, like kokoro-onnx's voices-v1.0.bin) in dir.
func LoadPacks(dir string) (map[string]*Pack, error) {
	out := map[string]*Pack{}
	add := func(p *Pack) { out[p.Name] = p }
	if ents, err := os.ReadDir(filepath.Join(dir, "voices")); err == nil {
		for _, e := range ents {
			name, ext := splitExt(e.Name())
			if e.IsDir() || (ext != ".bin" && ext != ".npy") {
				continue
			}
			b, err := readLimited(filepath.Join(dir, "voices", e.Name()))
			if err != nil {
				return nil, err
			}
			var p *Pack
			if ext == ".npy" {
				var a *Array
				if a, err = ReadNPY(b); err == nil {
					p, err = FromArray(name, a)
				}
			} else {
				p, err = ParseBin(name, b)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "voices", e.Name()), err)
			}
			add(p)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("kokoro: %w", err)
	}
	for _, e := range ents {
		_, ext := splitExt(e.Name())
		if e.IsDir() || (ext != ".npz" && ext != ".bin") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := readLimited(path)
		if err != nil {
			return nil, err
		}
		if !bytes.HasPrefix(b, []byte("PK\x03\x04")) {
			continue
		}
		arrs, err := ReadNPZ(b, 2*MaxPackBytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for name, a := range arrs {
			p, err := FromArray(name, a)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			add(p)
		}
	}
	return out, nil
}

func splitExt(n string) (string, string) {
	ext := strings.ToLower(filepath.Ext(n))
	return strings.TrimSuffix(n, filepath.Ext(n)), ext
}

func readLimited(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("kokoro: %w", err)
	}
	if st.Size() > MaxPackBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes (limit %d)", ErrVoice, path, st.Size(), MaxPackBytes)
	}
	// The size check alone trusts Stat: a FIFO or a device reports 0 and reads forever.
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kokoro: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxPackBytes+1))
	if err != nil {
		return nil, fmt.Errorf("kokoro: %s: %w", path, err)
	}
	if int64(len(b)) > MaxPackBytes {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrVoice, path, MaxPackBytes)
	}
	return b, nil
}

// Blend mixes packs with weights (normalised to sum 1): Kokoro's voice blending.
func Blend(name string, packs []*Pack, weights []float64) (*Pack, error) {
	if len(packs) == 0 || len(packs) != len(weights) {
		return nil, fmt.Errorf("%w: blend needs one weight per voice", ErrVoice)
	}
	var sum float64
	rows := packs[0].Rows
	for i, p := range packs {
		if weights[i] < 0 || math.IsNaN(weights[i]) {
			return nil, fmt.Errorf("%w: weight %g for %s", ErrVoice, weights[i], p.Name)
		}
		sum += weights[i]
		rows = min(rows, p.Rows)
	}
	if sum <= 0 {
		return nil, fmt.Errorf("%w: blend weights sum to zero", ErrVoice)
	}
	d := make([]float32, rows*StyleDim)
	for i, p := range packs {
		w := float32(weights[i] / sum)
		for j := range d {
			d[j] += w * p.Data[j]
		}
	}
	return &Pack{Name: name, Rows: rows, Data: d}, nil
}

// Stats is the per-row, per-dimension distribution of the installed packs, from which audio
// seeds draw new voices.
type Stats struct {
	Rows      int
	Mean, Std []float32 // Rows × StyleDim
	N         int       // packs it was computed from
}

// ComputeStats computes mean and standard deviation over packs (at least one).
func ComputeStats(packs map[string]*Pack) (*Stats, error) {
	if len(packs) == 0 {
		return nil, fmt.Errorf("%w: no voice packs installed", ErrVoice)
	}
	names := make([]string, 0, len(packs))
	rows := PackRows * 8
	for n, p := range packs {
		names = append(names, n)
		rows = min(rows, p.Rows)
	}
	sort.Strings(names) // deterministic summation order
	s := &Stats{Rows: rows, Mean: make([]float32, rows*StyleDim), Std: make([]float32, rows*StyleDim), N: len(packs)}
	for j := range s.Mean {
		var m, m2 float64
		for _, n := range names {
			v := float64(packs[n].Data[j])
			m += v
			m2 += v * v
		}
		m /= float64(len(names))
		vr := m2/float64(len(names)) - m*m
		s.Mean[j] = float32(m)
		s.Std[j] = float32(math.Sqrt(math.Max(vr, 0)))
	}
	return s, nil
}

// Sample draws a voice from the distribution: row r, dim d = mean + std·z[d], with one
// standard-normal z per dimension shared by all rows (so the voice stays itself across
// lengths). The same seed always gives the same pack. With a single installed pack the
// distribution has no spread; a floor of 5% of the mean magnitude keeps seeds distinct.
func (s *Stats) Sample(seed int64) *Pack {
	r := rand.New(rand.NewPCG(uint64(seed), 0x6b6f6b6f726f)) // "kokoro"
	z := make([]float64, StyleDim)
	for i := range z {
		z[i] = r.NormFloat64()
	}
	d := make([]float32, len(s.Mean))
	for j := range d {
		sd := float64(s.Std[j])
		if floor := 0.05 * math.Abs(float64(s.Mean[j])); sd < floor {
			sd = floor
		}
		d[j] = s.Mean[j] + float32(sd*z[j%StyleDim])
	}
	return &Pack{Name: fmt.Sprintf("seed:%d", seed), Rows: s.Rows, Data: d}
}

// StyleDistance is the Euclidean distance between two packs' styles at row n.
func StyleDistance(a, b *Pack, n int) float64 {
	x, y := a.Style(n), b.Style(n)
	var s float64
	for i := range x {
		d := float64(x[i] - y[i])
		s += d * d
	}
	return math.Sqrt(s)
}
