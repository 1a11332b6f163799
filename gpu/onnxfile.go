package gpu

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	ort "github.com/yalue/onnxruntime_go"
)

// readModelInfo reads what an ONNX file declares (graph inputs and outputs with their types
// and shapes, and the custom metadata) straight from its protobuf encoding, without building
// an ONNX Runtime session: the weights are seeked over, so a 1 GB model is read in
// milliseconds. ONNX Runtime's own answer would cost a full model load, which is what made
// every engine load its model three times (two inspections, then the real session).
//
// Inputs are reported as ONNX Runtime reports them: graph inputs that are also initializers
// (overridable constants in old exports) are not inputs to feed.
func readModelInfo(path string) (*ModelInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, errors.New("is a directory")
	}
	return parseModelInfo(f, st.Size(), path)
}

// parseModelInfo parses an ONNX ModelProto of size bytes from r.
func parseModelInfo(r io.ReadSeeker, size int64, path string) (*ModelInfo, error) {
	p := &pbReader{r: r, br: bufio.NewReaderSize(r, 64<<10), size: size}
	m := &onnxModel{meta: map[string]string{}, inits: map[string]TensorInfo{}}
	if err := p.message(size, m.field); err != nil {
		return nil, err
	}
	if !m.hasGraph {
		return nil, errors.New("no graph (not an ONNX model)")
	}
	info := &ModelInfo{Path: path, Metadata: m.meta, ExternalData: m.external, Initializers: m.inits, Nodes: m.nodes}
	for _, in := range m.inputs {
		if _, init := m.inits[in.Name]; !init {
			info.Inputs = append(info.Inputs, in)
		}
	}
	info.Outputs = m.outputs
	return info, nil
}

// onnxModel collects the parts of a ModelProto that ModelInfo reports.
type onnxModel struct {
	hasGraph        bool
	inputs, outputs []TensorInfo
	inits           map[string]TensorInfo
	nodes           []Node
	external        []string // external data files, each once
	meta            map[string]string
}

// Field numbers from onnx.proto.
const (
	modelGraph    = 7
	modelMetadata = 14

	graphNode              = 1
	graphInitializer       = 5
	graphInput             = 11
	graphOutput            = 12
	graphSparseInitializer = 15

	tensorDims          = 1
	tensorDataType      = 2
	tensorName          = 8
	tensorExternalData  = 13
	sparseTensorValues  = 1
	sparseTensorIndices = 2

	valueInfoName = 1
	valueInfoType = 2

	typeTensor       = 1
	typeSequence     = 4
	typeMap          = 5
	typeSparseTensor = 8
	typeOptional     = 9

	tensorTypeElem  = 1
	tensorTypeShape = 2
	shapeDim        = 1
	dimValue        = 1
	dimParam        = 2

	nodeInput  = 1
	nodeOutput = 2
	nodeOpType = 4
	nodeDomain = 7
)

func (m *onnxModel) field(p *pbReader, num int, wire int, n int64) error {
	switch {
	case num == modelGraph && wire == wireBytes:
		m.hasGraph = true
		return p.message(n, m.graphField)
	case num == modelMetadata && wire == wireBytes:
		var k, v string
		err := p.stringEntry(n, &k, &v)
		m.meta[k] = v
		return err
	}
	return p.skip(wire, n)
}

func (m *onnxModel) graphField(p *pbReader, num int, wire int, n int64) error {
	if wire != wireBytes {
		return p.skip(wire, n)
	}
	switch num {
	case graphNode:
		nd, err := p.node(n)
		m.nodes = append(m.nodes, nd)
		return err
	case graphInput, graphOutput:
		t, err := p.valueInfo(n)
		if err != nil {
			return err
		}
		if num == graphInput {
			m.inputs = append(m.inputs, t)
		} else {
			m.outputs = append(m.outputs, t)
		}
		return nil
	case graphInitializer:
		t, err := m.tensor(p, n)
		m.inits[t.Name] = t
		return err
	case graphSparseInitializer:
		return p.message(n, func(p *pbReader, num, wire int, n int64) error {
			if (num == sparseTensorValues || num == sparseTensorIndices) && wire == wireBytes {
				t, err := m.tensor(p, n)
				if num == sparseTensorValues {
					m.inits[t.Name] = TensorInfo{Name: t.Name, Type: t.Type}
				}
				return err
			}
			return p.skip(wire, n)
		})
	}
	return p.skip(wire, n)
}

// tensor reads a TensorProto's name, element type, dimensions and the file its external data
// is in (if any), seeking over its data.
func (m *onnxModel) tensor(p *pbReader, n int64) (TensorInfo, error) {
	t := TensorInfo{Shape: []int64{}}
	err := p.message(n, func(p *pbReader, num, wire int, n int64) error {
		switch {
		case num == tensorName && wire == wireBytes:
			return p.str(n, &t.Name)
		case num == tensorDataType && wire == wireVarint:
			t.Type = elementType(ort.TensorElementDataType(n))
			return nil
		case num == tensorDims && wire == wireVarint:
			t.Shape = append(t.Shape, n)
			return nil
		case num == tensorDims && wire == wireBytes: // packed
			return p.packedVarints(n, func(v int64) { t.Shape = append(t.Shape, v) })
		case num == tensorExternalData && wire == wireBytes:
			var k, v string
			if err := p.stringEntry(n, &k, &v); err != nil {
				return err
			}
			if k == "location" && !slices.Contains(m.external, v) {
				m.external = append(m.external, v)
			}
			return nil
		}
		return p.skip(wire, n)
	})
	return t, err
}

// node reads a NodeProto's operator, domain, inputs and outputs.
func (p *pbReader) node(n int64) (Node, error) {
	var nd Node
	err := p.message(n, func(p *pbReader, num, wire int, n int64) error {
		if wire != wireBytes {
			return p.skip(wire, n)
		}
		var s string
		switch num {
		case nodeInput, nodeOutput:
			if err := p.str(n, &s); err != nil {
				return err
			}
			if num == nodeInput {
				nd.Inputs = append(nd.Inputs, s)
			} else {
				nd.Outputs = append(nd.Outputs, s)
			}
			return nil
		case nodeOpType:
			return p.str(n, &nd.Op)
		case nodeDomain:
			return p.str(n, &nd.Domain)
		}
		return p.skip(wire, n)
	})
	return nd, err
}

// packedVarints reads n bytes of packed varints.
func (p *pbReader) packedVarints(n int64, fn func(int64)) error {
	end := p.pos + n
	for p.pos < end {
		u, err := p.varint()
		if err != nil {
			return err
		}
		fn(int64(u))
	}
	if p.pos != end {
		return errTruncated
	}
	return nil
}

// stringEntry reads a StringStringEntryProto (metadata_props, external_data).
func (p *pbReader) stringEntry(n int64, k, v *string) error {
	return p.message(n, func(p *pbReader, num, wire int, n int64) error {
		switch {
		case num == 1 && wire == wireBytes:
			return p.str(n, k)
		case num == 2 && wire == wireBytes:
			return p.str(n, v)
		}
		return p.skip(wire, n)
	})
}

// valueInfo reads a ValueInfoProto as ONNX Runtime describes it: a tensor's element type and
// dimensions (-1 where a dimension is symbolic or unknown), or the kind of a non-tensor value.
func (p *pbReader) valueInfo(n int64) (TensorInfo, error) {
	var t TensorInfo
	typ := valueType{kind: ort.ONNXTypeUnknown}
	err := p.message(n, func(p *pbReader, num, wire int, n int64) error {
		switch {
		case num == valueInfoName && wire == wireBytes:
			return p.str(n, &t.Name)
		case num == valueInfoType && wire == wireBytes:
			return p.message(n, typ.field)
		}
		return p.skip(wire, n)
	})
	if typ.kind == ort.ONNXTypeTensor {
		t.Type, t.Shape = elementType(typ.elem), typ.shape
	} else {
		t.Type = typ.kind.String()
	}
	return t, err
}

// valueType collects a TypeProto: the kind of value and, for a tensor, its element type and
// shape (nil when the shape is not given).
type valueType struct {
	kind  ort.ONNXType
	elem  ort.TensorElementDataType
	shape []int64
}

func (v *valueType) field(p *pbReader, num, wire int, n int64) error {
	if wire != wireBytes {
		return p.skip(wire, n)
	}
	switch num {
	case typeTensor:
		v.kind = ort.ONNXTypeTensor
		return p.message(n, v.tensorField)
	case typeSequence:
		v.kind = ort.ONNXTypeSequence
	case typeMap:
		v.kind = ort.ONNXTypeMap
	case typeSparseTensor:
		v.kind = ort.ONNXTypeSparseTensor
	case typeOptional:
		v.kind = ort.ONNXTypeOptional
	}
	return p.skip(wire, n)
}

// tensorField reads a TypeProto.Tensor's fields.
func (v *valueType) tensorField(p *pbReader, num, wire int, n int64) error {
	switch {
	case num == tensorTypeElem && wire == wireVarint:
		v.elem = ort.TensorElementDataType(n)
		return nil
	case num == tensorTypeShape && wire == wireBytes:
		v.shape = []int64{}
		return p.message(n, v.shapeField)
	}
	return p.skip(wire, n)
}

// shapeField reads a TensorShapeProto's dimensions: a value, or -1 for a symbolic or unknown one.
func (v *valueType) shapeField(p *pbReader, num, wire int, n int64) error {
	if num != shapeDim || wire != wireBytes {
		return p.skip(wire, n)
	}
	d := int64(-1)
	err := p.message(n, func(p *pbReader, num, wire int, n int64) error {
		if num == dimValue && wire == wireVarint {
			d = n
			return nil
		}
		return p.skip(wire, n)
	})
	v.shape = append(v.shape, d)
	return err
}

// Protocol-buffer wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// pbReader walks protocol-buffer messages in a file, reading only the fields asked for and
// seeking over the rest.
type pbReader struct {
	r    io.ReadSeeker
	br   *bufio.Reader
	pos  int64 // offset of the next byte br returns
	size int64
}

var errTruncated = errors.New("truncated (a field runs past its end)")

// message reads fields until n bytes are consumed, calling fn for each. For a length-delimited
// field fn gets its length and must consume exactly that; for a varint field it gets the value.
func (p *pbReader) message(n int64, fn func(p *pbReader, num, wire int, n int64) error) error {
	end := p.pos + n
	for p.pos < end {
		key, err := p.varint()
		if err != nil {
			return err
		}
		num, wire := int(key>>3), int(key&7)
		if num == 0 {
			return fmt.Errorf("bad field number 0 at byte %d", p.pos)
		}
		var v int64
		switch wire {
		case wireVarint:
			u, err := p.varint()
			if err != nil {
				return err
			}
			v = int64(u)
		case wireBytes:
			u, err := p.varint()
			if err != nil {
				return err
			}
			if u > uint64(end-p.pos) {
				return errTruncated
			}
			v = int64(u)
		case wireFixed64:
			v = 8
		case wireFixed32:
			v = 4
		default:
			return fmt.Errorf("unsupported wire type %d at byte %d", wire, p.pos)
		}
		start := p.pos
		if err := fn(p, num, wire, v); err != nil {
			return err
		}
		if wire == wireBytes && p.pos != start+v {
			return fmt.Errorf("field %d at byte %d: read %d of %d bytes", num, start, p.pos-start, v)
		}
		if p.pos > end {
			return errTruncated
		}
	}
	return nil
}

// skip passes over a field's payload (nothing for a varint, already read).
func (p *pbReader) skip(wire int, n int64) error {
	if wire == wireVarint {
		return nil
	}
	return p.discard(n)
}

func (p *pbReader) discard(n int64) error {
	if n <= int64(p.br.Buffered()) {
		_, err := p.br.Discard(int(n))
		p.pos += n
		return err
	}
	// Seek over large payloads (weights) instead of reading them.
	to := p.pos + n
	if to > p.size {
		return errTruncated
	}
	if _, err := p.r.Seek(to, io.SeekStart); err != nil {
		return err
	}
	p.br.Reset(p.r)
	p.pos = to
	return nil
}

// maxString bounds a name or metadata value held in memory.
const maxString = 64 << 20

func (p *pbReader) str(n int64, dst *string) error {
	if n > maxString {
		return fmt.Errorf("a string of %d bytes at byte %d", n, p.pos)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(p.br, b); err != nil {
		return truncated(err)
	}
	p.pos += n
	*dst = string(b)
	return nil
}

func (p *pbReader) varint() (uint64, error) {
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		b, err := p.br.ReadByte()
		if err != nil {
			return 0, truncated(err)
		}
		p.pos++
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return x, nil
		}
	}
	return 0, fmt.Errorf("bad varint at byte %d", p.pos)
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errTruncated
	}
	return err
}
