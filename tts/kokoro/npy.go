package kokoro

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// ErrNPY is wrapped by every .npy/.npz parsing error.
var ErrNPY = errors.New("kokoro: bad npy data")

// Limits on what the readers accept from outside files.
const (
	MaxNPYElements = 64 << 20 // 256 MiB of float32
	MaxNPZEntries  = 4096
	maxNPYHeader   = 64 << 10
)

// Array is a float32 n-dimensional array read from an .npy file (C order).
type Array struct {
	Shape []int
	Data  []float32
}

// ReadNPY parses a NumPy .npy file (format versions 1–3) holding little- or big-endian float16,
// float32 or float64 data in C order. Other dtypes, Fortran order, object arrays and sizes that
// disagree with the data are errors.
func ReadNPY(b []byte) (*Array, error) {
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" {
		return nil, fmt.Errorf("%w: no \\x93NUMPY magic", ErrNPY)
	}
	var hlen, off int
	switch b[6] {
	case 1:
		hlen, off = int(binary.LittleEndian.Uint16(b[8:10])), 10
	case 2, 3:
		if len(b) < 12 {
			return nil, fmt.Errorf("%w: truncated header", ErrNPY)
		}
		hlen, off = int(binary.LittleEndian.Uint32(b[8:12])), 12
	default:
		return nil, fmt.Errorf("%w: format version %d", ErrNPY, b[6])
	}
	if hlen > maxNPYHeader || off+hlen > len(b) {
		return nil, fmt.Errorf("%w: header length %d", ErrNPY, hlen)
	}
	h, err := parseNPYHeader(string(b[off : off+hlen]))
	if err != nil {
		return nil, err
	}
	if h.fortran {
		return nil, fmt.Errorf("%w: Fortran-order arrays are not supported", ErrNPY)
	}
	var size, n int = 0, 1
	var order binary.ByteOrder = binary.LittleEndian
	switch h.descr[0] {
	case '<', '|':
	case '>':
		order = binary.BigEndian
	default:
		return nil, fmt.Errorf("%w: dtype %q", ErrNPY, h.descr)
	}
	switch h.descr[1:] {
	case "f2":
		size = 2
	case "f4":
		size = 4
	case "f8":
		size = 8
	default:
		return nil, fmt.Errorf("%w: dtype %q (want float16/32/64)", ErrNPY, h.descr)
	}
	for _, d := range h.shape {
		if d < 0 || (d > 0 && n > MaxNPYElements/d) {
			return nil, fmt.Errorf("%w: shape %v too large", ErrNPY, h.shape)
		}
		n *= d
	}
	body := b[off+hlen:]
	if len(body) != n*size {
		return nil, fmt.Errorf("%w: shape %v needs %d bytes, file has %d", ErrNPY, h.shape, n*size, len(body))
	}
	a := &Array{Shape: h.shape, Data: make([]float32, n)}
	for i := range a.Data {
		switch size {
		case 2:
			a.Data[i] = half(order.Uint16(body[2*i:]))
		case 4:
			a.Data[i] = math.Float32frombits(order.Uint32(body[4*i:]))
		case 8:
			a.Data[i] = float32(math.Float64frombits(order.Uint64(body[8*i:])))
		}
	}
	return a, nil
}

type npyHeader struct {
	descr   string
	fortran bool
	shape   []int
}

// parseNPYHeader reads the Python dict literal of an .npy header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (510, 1, 256), }
func parseNPYHeader(s string) (npyHeader, error) {
	var h npyHeader
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return h, fmt.Errorf("%w: header is not a dict", ErrNPY)
	}
	s = s[1 : len(s)-1]
	seen := map[string]bool{}
	for len(strings.TrimSpace(s)) > 0 {
		s = strings.TrimLeft(s, " ,")
		if s == "" {
			break
		}
		key, rest, err := pyString(s)
		if err != nil {
			return h, err
		}
		rest = strings.TrimLeft(rest, " ")
		if !strings.HasPrefix(rest, ":") {
			return h, fmt.Errorf("%w: header: missing ':' after %q", ErrNPY, key)
		}
		rest = strings.TrimLeft(rest[1:], " ")
		seen[key] = true
		switch key {
		case "descr":
			h.descr, rest, err = pyString(rest)
			if err != nil {
				return h, err
			}
			if len(h.descr) < 3 {
				return h, fmt.Errorf("%w: dtype %q", ErrNPY, h.descr)
			}
		case "fortran_order":
			switch {
			case strings.HasPrefix(rest, "False"):
				rest = rest[5:]
			case strings.HasPrefix(rest, "True"):
				h.fortran, rest = true, rest[4:]
			default:
				return h, fmt.Errorf("%w: fortran_order is not a bool", ErrNPY)
			}
		case "shape":
			if !strings.HasPrefix(rest, "(") {
				return h, fmt.Errorf("%w: shape is not a tuple", ErrNPY)
			}
			end := strings.IndexByte(rest, ')')
			if end < 0 {
				return h, fmt.Errorf("%w: unterminated shape", ErrNPY)
			}
			h.shape = []int{}
			for _, f := range strings.Split(rest[1:end], ",") {
				f = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(f), "L"))
				if f == "" {
					continue
				}
				d, err := strconv.Atoi(f)
				if err != nil || d < 0 {
					return h, fmt.Errorf("%w: shape entry %q", ErrNPY, f)
				}
				h.shape = append(h.shape, d)
			}
			if len(h.shape) > 8 {
				return h, fmt.Errorf("%w: %d dimensions", ErrNPY, len(h.shape))
			}
			rest = rest[end+1:]
		default:
			return h, fmt.Errorf("%w: unknown header key %q", ErrNPY, key)
		}
		s = rest
	}
	if !seen["descr"] || !seen["shape"] || !seen["fortran_order"] {
		return h, fmt.Errorf("%w: header lacks descr, fortran_order or shape", ErrNPY)
	}
	return h, nil
}

func pyString(s string) (string, string, error) {
	if s == "" || (s[0] != '\'' && s[0] != '"') {
		return "", s, fmt.Errorf("%w: header: expected a string at %.20q", ErrNPY, s)
	}
	end := strings.IndexByte(s[1:], s[0])
	if end < 0 {
		return "", s, fmt.Errorf("%w: header: unterminated string", ErrNPY)
	}
	return s[1 : 1+end], s[2+end:], nil
}

// half converts an IEEE 754 binary16 value.
func half(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := int(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0:
		f := float32(mant) / 1024 * float32(math.Pow(2, -14))
		if sign != 0 {
			f = -f
		}
		return f
	case exp == 31:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | uint32(exp-15+127)<<23 | mant<<13)
}

// ReadNPZ parses a NumPy .npz archive (a zip of .npy files, stored or deflated, as np.savez
// and np.savez_compressed write it). Names lose their ".npy" suffix. maxBytes bounds the total
// uncompressed size.
func ReadNPZ(b []byte, maxBytes int64) (map[string]*Array, error) {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("%w: not a zip archive: %v", ErrNPY, err)
	}
	if len(zr.File) > MaxNPZEntries {
		return nil, fmt.Errorf("%w: %d entries", ErrNPY, len(zr.File))
	}
	out := map[string]*Array{}
	var total int64
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		name := strings.TrimSuffix(f.Name, ".npy")
		if f.UncompressedSize64 > uint64(maxBytes) || total+int64(f.UncompressedSize64) > maxBytes {
			return nil, fmt.Errorf("%w: %s: archive larger than %d bytes", ErrNPY, f.Name, maxBytes)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrNPY, f.Name, err)
		}
		data, err := io.ReadAll(io.LimitReader(rc, maxBytes-total+1))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrNPY, f.Name, err)
		}
		total += int64(len(data))
		if total > maxBytes {
			return nil, fmt.Errorf("%w: %s: archive larger than %d bytes", ErrNPY, f.Name, maxBytes)
		}
		a, err := ReadNPY(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		out[name] = a
	}
	return out, nil
}
