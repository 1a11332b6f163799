package convert

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The template graphs are ONNX ModelProtos whose weights were emptied (name, type and shape
// kept). fillModel writes a template with the weights put back as raw data, streaming: each
// weight is made by its recipe when its turn comes, so a 1 GB model never sits in memory.

// Field numbers from onnx.proto.
const (
	fModelGraph       = 7
	fGraphInitializer = 5
	fTensorName       = 8
	fTensorRawData    = 9
)

// TensorProto fields that hold data; an emptied template tensor may still carry some.
var dataFields = map[int]bool{4: true, 5: true, 6: true, 7: true, 9: true, 10: true, 11: true, 13: true, 14: true}

const (
	wVarint  = 0
	wFixed64 = 1
	wBytes   = 2
	wFixed32 = 5
)

var errProto = errors.New("template: bad protobuf")

// field is one field of a message: its number, wire type and the bytes it spans (key included),
// and for a length-delimited field its payload.
type field struct {
	num, wire int
	span      []byte
	payload   []byte
}

func fields(b []byte) ([]field, error) {
	var out []field
	for i := 0; i < len(b); {
		start := i
		key, n := binary.Uvarint(b[i:])
		if n <= 0 {
			return nil, errProto
		}
		i += n
		f := field{num: int(key >> 3), wire: int(key & 7)}
		switch f.wire {
		case wVarint:
			_, n := binary.Uvarint(b[i:])
			if n <= 0 {
				return nil, errProto
			}
			i += n
		case wFixed64:
			i += 8
		case wFixed32:
			i += 4
		case wBytes:
			l, n := binary.Uvarint(b[i:])
			if n <= 0 || l > uint64(len(b)-i-n) {
				return nil, errProto
			}
			i += n
			f.payload = b[i : i+int(l)]
			i += int(l)
		default:
			return nil, errProto
		}
		if i > len(b) {
			return nil, errProto
		}
		f.span = b[start:i]
		out = append(out, f)
	}
	return out, nil
}

func appendKey(b []byte, num, wire int) []byte {
	return binary.AppendUvarint(b, uint64(num)<<3|uint64(wire))
}

func varintLen(v uint64) int64 { return int64(len(binary.AppendUvarint(nil, v))) }

// part is a piece of the output: bytes as they are, or a weight made when written.
type part struct {
	raw  []byte
	make func() ([]byte, error) // nil for raw
	size int64                  // of what make returns
}

func (p part) len() int64 {
	if p.make == nil {
		return int64(len(p.raw))
	}
	return p.size
}

// fillModel writes template (an ONNX model) to w with every initializer named in weights
// filled by its maker, which must return exactly size bytes of raw data.
func fillModel(w io.Writer, template []byte, weights map[string]weight) (filled int, err error) {
	top, err := fields(template)
	if err != nil {
		return 0, err
	}
	var out []part
	for _, f := range top {
		if f.num != fModelGraph || f.wire != wBytes {
			out = append(out, part{raw: f.span})
			continue
		}
		gf, err := fields(f.payload)
		if err != nil {
			return 0, err
		}
		var graph []part
		for _, g := range gf {
			if g.num != fGraphInitializer || g.wire != wBytes {
				graph = append(graph, part{raw: g.span})
				continue
			}
			tf, err := fields(g.payload)
			if err != nil {
				return 0, err
			}
			var name string
			for _, t := range tf {
				if t.num == fTensorName && t.wire == wBytes {
					name = string(t.payload)
				}
			}
			wt, ok := weights[name]
			if !ok {
				graph = append(graph, part{raw: g.span})
				continue
			}
			filled++
			var head []byte
			for _, t := range tf {
				if !dataFields[t.num] {
					head = append(head, t.span...)
				}
			}
			head = appendKey(head, fTensorRawData, wBytes)
			head = binary.AppendUvarint(head, uint64(wt.size))
			body := int64(len(head)) + wt.size
			pre := appendKey(nil, fGraphInitializer, wBytes)
			pre = binary.AppendUvarint(pre, uint64(body))
			graph = append(graph, part{raw: append(pre, head...)}, part{make: wt.make, size: wt.size})
		}
		var glen int64
		for _, p := range graph {
			glen += p.len()
		}
		pre := appendKey(nil, fModelGraph, wBytes)
		pre = binary.AppendUvarint(pre, uint64(glen))
		out = append(out, part{raw: pre})
		out = append(out, graph...)
	}
	for _, p := range out {
		if p.make == nil {
			if _, err := w.Write(p.raw); err != nil {
				return filled, err
			}
			continue
		}
		b, err := p.make()
		if err != nil {
			return filled, err
		}
		if int64(len(b)) != p.size {
			return filled, fmt.Errorf("a weight of %d bytes where %d were planned", len(b), p.size)
		}
		if _, err := w.Write(b); err != nil {
			return filled, err
		}
	}
	return filled, nil
}

// weight is a template initializer's raw data, made on demand.
type weight struct {
	size int64
	make func() ([]byte, error)
}
