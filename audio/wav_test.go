package audio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func testSignal(f Format, frames int) *Buffer {
	b := &Buffer{Format: f, Data: make([]float32, frames*f.Channels)}
	for i := 0; i < frames; i++ {
		for c := 0; c < f.Channels; c++ {
			b.Data[i*f.Channels+c] = float32(0.8 * math.Sin(float64(i)*0.01*float64(c+1)+float64(c)))
		}
	}
	return b
}

func TestWAVRoundTrip(t *testing.T) {
	tol := map[SampleFormat]float64{U8: 1.0 / 128, S16: 1.0 / 32768, S24: 1.0 / 8388608, S32: 1e-7, F32: 0, F64: 0}
	for _, sf := range []SampleFormat{U8, S16, S24, S32, F32, F64, MuLaw, ALaw} {
		for _, ch := range []int{1, 2, 6} {
			t.Run(sf.String()+"/"+string(rune('0'+ch)), func(t *testing.T) {
				in := testSignal(Format{SampleRate: 22050, Channels: ch}, 1001)
				var buf bytes.Buffer
				if err := WriteWAV(&buf, in, sf); err != nil {
					t.Fatal(err)
				}
				if buf.Len()%2 != 0 {
					t.Errorf("file length %d is odd (RIFF pads chunks to even)", buf.Len())
				}
				wr, err := NewWAVReader(bytes.NewReader(buf.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				info := wr.Info()
				if info.Extensible != (ch > 2) || info.SampleFormat != sf || info.Frames != 1001 {
					t.Errorf("info = %+v", info)
				}
				out, err := ReadWAV(bytes.NewReader(buf.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				if out.Format != in.Format || len(out.Data) != len(in.Data) {
					t.Fatalf("got %v × %d, want %v × %d", out.Format, len(out.Data), in.Format, len(in.Data))
				}
				for i := range in.Data {
					tol := tol[sf] * 0.51
					if sf == MuLaw || sf == ALaw { // a step is 1/16 of its segment: at most 1/32 of the value
						tol = math.Abs(float64(in.Data[i]))/32 + 16.0/32768
					}
					if d := math.Abs(float64(out.Data[i] - in.Data[i])); d > tol+1e-9 {
						t.Fatalf("sample %d: got %v want %v (diff %g)", i, out.Data[i], in.Data[i], d)
					}
				}
			})
		}
	}
}

// wavBytes builds a WAV file by hand: fmt body, extra chunks before data, data bytes and the
// size written in the data chunk header.
func wavBytes(fmtBody []byte, extra [][2]string, data []byte, dataSize uint32) []byte {
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(0)) // many writers get this wrong; we ignore it
	b.WriteString("WAVE")
	for _, c := range extra {
		b.WriteString(c[0])
		binary.Write(&b, binary.LittleEndian, uint32(len(c[1])))
		b.WriteString(c[1])
		if len(c[1])%2 == 1 {
			b.WriteByte(0)
		}
	}
	b.WriteString("fmt ")
	binary.Write(&b, binary.LittleEndian, uint32(len(fmtBody)))
	b.Write(fmtBody)
	b.WriteString("data")
	binary.Write(&b, binary.LittleEndian, dataSize)
	b.Write(data)
	return b.Bytes()
}

func fmtPCM(tag, ch uint16, rate uint32, align, bits uint16) []byte {
	var b bytes.Buffer
	le := binary.LittleEndian
	binary.Write(&b, le, tag)
	binary.Write(&b, le, ch)
	binary.Write(&b, le, rate)
	binary.Write(&b, le, rate*uint32(align))
	binary.Write(&b, le, align)
	binary.Write(&b, le, bits)
	return b.Bytes()
}

func fmtExt(ch uint16, rate uint32, bits, valid uint16, sub uint16) []byte {
	b := fmtPCM(0xFFFE, ch, rate, ch*bits/8, bits)
	le := binary.LittleEndian
	b = le.AppendUint16(b, 22)
	b = le.AppendUint16(b, valid)
	b = le.AppendUint32(b, 0x3)
	b = le.AppendUint16(b, sub)
	return append(b, wavGUIDTail...)
}

func TestWAVHeaders(t *testing.T) {
	s16 := EncodePCM(nil, []float32{0, 0.5, -0.5, 0.25}, S16)
	cases := []struct {
		name    string
		file    []byte
		want    error // nil: must succeed
		samples int
	}{
		{"plain", wavBytes(fmtPCM(1, 1, 16000, 2, 16), nil, s16, 8), nil, 4},
		{"unknown chunks skipped", wavBytes(fmtPCM(1, 2, 16000, 4, 16), [][2]string{{"LIST", "INFOISFT abc"}, {"junk", "odd"}}, s16, 8), nil, 4},
		{"extensible 24 in 24", wavBytes(fmtExt(1, 48000, 24, 24, 1), nil, EncodePCM(nil, []float32{0.1, 0.2}, S24), 6), nil, 2},
		{"extensible float", wavBytes(fmtExt(2, 48000, 32, 32, 3), nil, EncodePCM(nil, []float32{0.1, 0.2}, F32), 8), nil, 2},
		{"streamed size 0xFFFFFFFF", wavBytes(fmtPCM(1, 1, 16000, 2, 16), nil, s16, 0xFFFFFFFF), nil, 4},
		{"odd trailing byte ignored", wavBytes(fmtPCM(1, 1, 16000, 2, 16), nil, append(s16, 7), 9), nil, 4},
		{"empty data", wavBytes(fmtPCM(1, 1, 16000, 2, 16), nil, nil, 0), nil, 0},
		{"truncated data: what is there, with a warning", wavBytes(fmtPCM(1, 1, 16000, 2, 16), nil, s16, 1000), ErrTruncated, 4},
		{"data size 0 left by a stopped recorder", wavBytes(fmtPCM(1, 1, 16000, 2, 16), nil, s16, 0), ErrRecovered, 4},
		{"truncated mid-frame", wavBytes(fmtPCM(1, 2, 16000, 4, 16), nil, s16[:7], 16), ErrRecovered, 2},
		{"lying huge data", wavBytes(fmtPCM(1, 1, 16000, 2, 16), nil, s16, 0x7FFFEFF0), ErrTooLarge, 0},
		{"espeak-ng pipe size", wavBytes(fmtPCM(1, 1, 16000, 2, 16), nil, s16, 0x7FFFF000), nil, 4},
		{"bad block align", wavBytes(fmtPCM(1, 2, 16000, 3, 16), nil, s16, 8), ErrFormat, 0},
		{"zero channels", wavBytes(fmtPCM(1, 0, 16000, 0, 16), nil, s16, 8), ErrFormat, 0},
		{"zero rate", wavBytes(fmtPCM(1, 1, 0, 2, 16), nil, s16, 8), ErrFormat, 0},
		{"absurd rate", wavBytes(fmtPCM(1, 1, 4000000000, 2, 16), nil, s16, 8), ErrFormat, 0},
		{"12-bit", wavBytes(fmtPCM(1, 1, 16000, 2, 12), nil, s16, 8), ErrUnsupported, 0},
		{"mu-law", wavBytes(fmtPCM(7, 1, 8000, 1, 8), nil, s16, 8), nil, 8},
		{"a-law stereo", wavBytes(fmtPCM(6, 2, 8000, 2, 8), nil, s16, 8), nil, 8},
		{"extensible mu-law", wavBytes(fmtExt(1, 8000, 8, 8, 7), nil, s16, 8), nil, 8},
		{"16-bit mu-law", wavBytes(fmtPCM(7, 1, 8000, 2, 16), nil, s16, 8), ErrUnsupported, 0},
		{"mp3 tag", wavBytes(fmtPCM(0x55, 1, 8000, 1, 8), nil, s16, 8), ErrUnsupported, 0},
		{"short fmt", wavBytes([]byte{1, 0, 1, 0}, nil, s16, 8), ErrFormat, 0},
		{"not riff", []byte("OggS\x00\x00\x00\x00WAVEfmt "), ErrFormat, 0},
		{"rf64", []byte("RF64\xff\xff\xff\xffWAVE"), ErrUnsupported, 0},
		{"empty", nil, ErrFormat, 0},
		{"header only", []byte("RIFF\x04\x00\x00\x00WA"), ErrTruncated, 0},
		{"no data chunk", []byte("RIFF\x04\x00\x00\x00WAVE"), ErrFormat, 0},
		{"chunk larger than file", append([]byte("RIFF\x04\x00\x00\x00WAVELIST\xff\xff\xff\x7f"), 1, 2, 3), ErrTruncated, 0},
		{"data before fmt", []byte("RIFF\x04\x00\x00\x00WAVEdata\x02\x00\x00\x00\x00\x00"), ErrFormat, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, seek := range []bool{false, true} {
				var r io.Reader = bytes.NewReader(tc.file)
				if !seek {
					r = io.MultiReader(r) // hides Seek
				}
				b, err := ReadWAV(r)
				if tc.want == nil {
					if err != nil {
						t.Fatalf("seek=%v: %v", seek, err)
					}
					if len(b.Data) != tc.samples {
						t.Fatalf("seek=%v: %d samples, want %d", seek, len(b.Data), tc.samples)
					}
					continue
				}
				if !errors.Is(err, tc.want) {
					t.Fatalf("seek=%v: err = %v, want %v", seek, err, tc.want)
				}
				if errors.Is(err, ErrRecovered) != (tc.samples > 0) {
					t.Fatalf("seek=%v: err = %v; a warning (ErrRecovered) exactly when samples are recovered", seek, err)
				}
				if tc.samples > 0 && (b == nil || len(b.Data) != tc.samples) {
					t.Fatalf("seek=%v: recovered %v, want %d samples", seek, b, tc.samples)
				}
			}
		})
	}
}

func TestWAVStreamingBoundedMemory(t *testing.T) {
	// a 10-minute 48 kHz stereo stream generated on the fly is read in constant memory
	f := Format{SampleRate: 48000, Channels: 2}
	frames := int64(48000 * 600)
	h, _ := WAVHeader(f, S16, frames*4)
	body := io.LimitReader(zeroReader{}, frames*4)
	wr, err := NewWAVReader(io.MultiReader(bytes.NewReader(h), body))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]float32, 4096)
	var total int64
	for {
		n, err := wr.Read(context.Background(), buf)
		total += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if total != frames*2 {
		t.Fatalf("read %d samples, want %d", total, frames*2)
	}
	if cap(wr.buf) > 64<<10 {
		t.Fatalf("reader buffer grew to %d bytes", cap(wr.buf))
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestWAVWriterStreamingAndSeekable(t *testing.T) {
	in := testSignal(Format{SampleRate: 16000, Channels: 1}, 333)
	// non-seekable: unknown-size header, still readable
	var pipe bytes.Buffer
	w, err := NewWAVWriter(&pipe, in.Format, U8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(context.Background(), in.Data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadWAV(&pipe)
	if err != nil || len(got.Data) != 333 {
		t.Fatalf("streamed WAV: %v, %d samples", err, len(got.Data))
	}
	// seekable: Close patches the sizes
	path := filepath.Join(t.TempDir(), "x.wav")
	fh, _ := os.Create(path)
	w, _ = NewWAVWriter(fh, in.Format, S16)
	w.Write(context.Background(), in.Data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	fh, _ = os.Open(path)
	defer fh.Close()
	wr, err := NewWAVReader(fh)
	if err != nil || wr.Info().Frames != 333 {
		t.Fatalf("seekable WAV: %v, frames %d", err, wr.Info().Frames)
	}
}

func TestPCMEncodeExact(t *testing.T) {
	for _, sf := range []SampleFormat{U8, S16, S24, S32} {
		// every integer code decodes and re-encodes to itself; out-of-range floats clip
		raw := EncodePCM(nil, []float32{-1, -0.5, 0, 0.5, 0.999, 2, -3}, sf)
		dec := make([]float32, 7)
		DecodePCM(dec, raw, sf)
		again := EncodePCM(nil, dec, sf)
		if !bytes.Equal(raw, again) {
			t.Errorf("%v: re-encoding changed bytes", sf)
		}
		if dec[5] < 0.99 || dec[6] != -1 {
			t.Errorf("%v: clipping gave %v %v", sf, dec[5], dec[6])
		}
	}
}

func FuzzWAV(f *testing.F) {
	s16 := EncodePCM(nil, []float32{0, 0.5, -0.5, 0.25}, S16)
	f.Add(wavBytes(fmtPCM(1, 1, 16000, 2, 16), nil, s16, 8))
	f.Add(wavBytes(fmtPCM(1, 2, 16000, 4, 16), [][2]string{{"LIST", "abc"}}, s16, 8))
	f.Add(wavBytes(fmtExt(1, 48000, 24, 20, 1), nil, s16[:6], 6))
	f.Add(wavBytes(fmtExt(2, 48000, 32, 32, 3), nil, s16, 8))
	f.Add(wavBytes(fmtPCM(3, 1, 8000, 8, 64), nil, s16, 0xFFFFFFFF))
	f.Add(wavBytes(fmtPCM(1, 1, 16000, 1, 8), nil, s16, 1000))
	f.Add([]byte("RIFF\x04\x00\x00\x00WAVELIST\xff\xff\xff\x7f"))
	f.Add(wavBytes(fmtPCM(1, 1, 16000, 2, 16), nil, s16, 0))          // recorder stopped: data size 0
	f.Add(wavBytes(fmtPCM(1, 2, 16000, 4, 16), nil, s16[:7], 16))     // cut mid-frame
	f.Add(wavBytes(fmtPCM(3, 1, 16000, 4, 32), nil, s16, 0x7FFFEFFF)) // cut, float
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeWAV(bytes.NewReader(data), 1<<20)
		if err != nil && !errors.Is(err, ErrRecovered) {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if err := b.Format.Validate(); err != nil {
			t.Fatalf("accepted bad format: %v", err)
		}
		if len(b.Data)%b.Channels != 0 || len(b.Data) > len(data) {
			t.Fatalf("%d samples from %d bytes with %d channels", len(b.Data), len(data), b.Channels)
		}
		for _, v := range b.Data {
			if v != v || math.IsInf(float64(v), 0) {
				t.Fatalf("bad sample %v", v)
			}
		}
		// what we read we can write and read back identically (as float)
		var out bytes.Buffer
		if err := WriteWAV(&out, b, F32); err != nil {
			t.Fatal(err)
		}
		b2, err := ReadWAV(&out)
		if err != nil || len(b2.Data) != len(b.Data) {
			t.Fatalf("rewrite: %v", err)
		}
	})
}

// G.711 as the standard defines it: the codes' values, silence, full scale, order, and the
// nearest code on the way back.
func TestG711(t *testing.T) {
	known := []struct {
		sf   SampleFormat
		code byte
		want int // 16-bit linear
	}{
		{MuLaw, 0xFF, 0}, {MuLaw, 0x7F, 0}, {MuLaw, 0x80, 32124}, {MuLaw, 0x00, -32124}, {MuLaw, 0xFE, 8}, {MuLaw, 0xEF, 132},
		{ALaw, 0xD5, 8}, {ALaw, 0x55, -8}, {ALaw, 0xAA, 32256}, {ALaw, 0x2A, -32256}, {ALaw, 0xC5, 264},
	}
	for _, k := range known {
		var got [1]float32
		DecodePCM(got[:], []byte{k.code}, k.sf)
		if got[0] != float32(k.want)/32768 {
			t.Errorf("%v code %#02x: %v, want %d/32768", k.sf, k.code, got[0]*32768, k.want)
		}
	}
	for _, sf := range []SampleFormat{MuLaw, ALaw} {
		tb := g711[sf]
		distinct := map[float32]bool{}
		for c := 0; c < 256; c++ {
			v := tb.decode[c]
			distinct[v] = true
			if -v != tb.decode[c^0x80] {
				t.Errorf("%v: code %#02x is %v but its sign twin %v", sf, c, v, tb.decode[c^0x80])
			}
			// every value comes back to a code of the same value
			if e := tb.encode(v); tb.decode[e] != v {
				t.Errorf("%v: %v encodes to %#02x = %v", sf, v, e, tb.decode[e])
			}
		}
		if want := map[SampleFormat]int{MuLaw: 255, ALaw: 256}[sf]; len(distinct) != want {
			t.Errorf("%v: %d distinct values, want %d", sf, len(distinct), want) // µ-law has +0 and -0
		}
		top := tb.decode[tb.codes[255]]
		for _, c := range []struct{ in, want float32 }{{2, top}, {-2, -top}, {float32(math.NaN()), 0}, {float32(math.Inf(1)), top}} {
			var got [1]float32
			DecodePCM(got[:], EncodePCM(nil, []float32{c.in}, sf), sf)
			if got[0] != c.want && !(c.want == 0 && math.Abs(float64(got[0])) <= 8.0/32768) {
				t.Errorf("%v: %v -> %v, want %v", sf, c.in, got[0], c.want)
			}
		}
		// nearest: a value just above a code's is not pushed to the next one
		for i := 1; i < 255; i++ {
			lo, hi := tb.decode[tb.codes[i]], tb.decode[tb.codes[i+1]]
			if lo == hi {
				continue
			}
			if e := tb.encode(lo + (hi-lo)*0.4); tb.decode[e] != lo {
				t.Fatalf("%v: %v between %v and %v encodes to %v", sf, lo+(hi-lo)*0.4, lo, hi, tb.decode[e])
			}
			if e := tb.encode(lo + (hi-lo)*0.6); tb.decode[e] != hi {
				t.Fatalf("%v: %v between %v and %v encodes to %v", sf, lo+(hi-lo)*0.6, lo, hi, tb.decode[e])
			}
		}
	}
	if got := EncodePCM(nil, []float32{0}, MuLaw); got[0] != 0xFF { // silence, as every encoder writes it
		t.Errorf("µ-law 0 = %#02x, want 0xff", got[0])
	}
	if got := EncodePCM(nil, []float32{0}, ALaw); got[0] != 0xD5 {
		t.Errorf("A-law 0 = %#02x, want 0xd5", got[0])
	}
	if f, err := ParseSampleFormat("ulaw"); f != MuLaw || err != nil {
		t.Errorf("ulaw: %v %v", f, err)
	}
	if f, err := ParseSampleFormat(ALaw.String()); f != ALaw || err != nil {
		t.Errorf("alaw: %v %v", f, err)
	}
}

// G.711 files carry what the RIFF spec asks of a compressed format: an 18-byte fmt chunk
// (cbSize 0) and a fact chunk with the frame count; they read back as written.
func TestG711Header(t *testing.T) {
	in := testSignal(Format{SampleRate: 8000, Channels: 1}, 801)
	for _, sf := range []SampleFormat{MuLaw, ALaw} {
		var buf bytes.Buffer
		if err := WriteWAV(&buf, in, sf); err != nil {
			t.Fatal(err)
		}
		b := buf.Bytes()
		le := binary.LittleEndian
		if string(b[12:16]) != "fmt " || le.Uint32(b[16:]) != 18 || le.Uint16(b[36:]) != 0 {
			t.Fatalf("%v: fmt chunk %q of %d bytes, cbSize %d", sf, b[12:16], le.Uint32(b[16:]), le.Uint16(b[36:]))
		}
		if string(b[38:42]) != "fact" || le.Uint32(b[42:]) != 4 || le.Uint32(b[46:]) != 801 {
			t.Fatalf("%v: fact chunk %q size %d frames %d", sf, b[38:42], le.Uint32(b[42:]), le.Uint32(b[46:]))
		}
		if string(b[50:54]) != "data" || le.Uint32(b[54:]) != 801 || int(le.Uint32(b[4:])) != len(b)-8 {
			t.Fatalf("%v: data %q %d bytes, RIFF size %d of a %d-byte file", sf, b[50:54], le.Uint32(b[54:]), le.Uint32(b[4:]), len(b))
		}
		out, err := ReadWAV(bytes.NewReader(b))
		if err != nil || len(out.Data) != 801 {
			t.Fatalf("%v: read back %v, %v", sf, out, err)
		}
	}
}
