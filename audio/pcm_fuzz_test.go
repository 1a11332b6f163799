package audio

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
)

// FuzzPCMReader feeds arbitrary bytes (a network payload) through PCMReader in arbitrary read
// sizes: it must return exactly the whole frames the bytes hold, in order, and end cleanly.
func FuzzPCMReader(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, uint8(0), uint8(2), uint8(3))
	f.Add(EncodePCM(nil, []float32{0.5, -0.5, 1, -1}, F32), uint8(2), uint8(1), uint8(1))
	f.Add([]byte{}, uint8(1), uint8(3), uint8(7))
	f.Add(bytes.Repeat([]byte{0xff, 0x7f, 0x00, 0x80}, 300), uint8(1), uint8(2), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, fmtSel, ch, readSize uint8) {
		sfs := []SampleFormat{U8, S16, S24, S32, F32, F64, MuLaw, ALaw}
		sf := sfs[int(fmtSel)%len(sfs)]
		channels := int(ch)%4 + 1
		r, err := NewPCMReader(&chunkReader{data: data, n: int(readSize)%13 + 1}, Format{SampleRate: 16000, Channels: channels}, sf)
		if err != nil {
			t.Fatal(err)
		}
		want := len(data) / (sf.Size() * channels) * channels
		ref := make([]float32, len(data)/sf.Size())
		DecodePCM(ref, data, sf)
		var got []float32
		buf := make([]float32, channels*(int(readSize)%5+1))
		for i := 0; ; i++ {
			n, err := r.Read(context.Background(), buf)
			if n%channels != 0 {
				t.Fatalf("read %d samples, not whole %d-channel frames", n, channels)
			}
			got = append(got, buf[:n]...)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if i > len(data)+10 {
				t.Fatal("reader does not end")
			}
		}
		if len(got) != want {
			t.Fatalf("%d samples from %d bytes of %v × %d, want %d", len(got), len(data), sf, channels, want)
		}
		for i := range got {
			if got[i] != ref[i] && !(got[i] != got[i] && ref[i] != ref[i]) {
				t.Fatalf("sample %d: %v, want %v", i, got[i], ref[i])
			}
		}
	})
}

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	data []byte
	n    int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.data)
	c.data = c.data[k:]
	return k, nil
}
