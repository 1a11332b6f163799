package audio

import (
	"math"
	"testing"
)

func sineAt(rate, frames int, freq, amp float64) []float32 {
	out := make([]float32, frames)
	for i := range out {
		out[i] = float32(amp * math.Sin(2*math.Pi*freq*float64(i)/float64(rate)))
	}
	return out
}

// snrDB compares got with want over [from, to) after the best gain match; the result is the
// ratio of want's power to the residual's.
func snrDB(got, want []float32, from, to int) float64 {
	var sig, noise float64
	for i := from; i < to; i++ {
		d := float64(got[i] - want[i])
		sig += float64(want[i]) * float64(want[i])
		noise += d * d
	}
	if noise == 0 {
		return 300
	}
	return 10 * math.Log10(sig/noise)
}

func TestResampleSines(t *testing.T) {
	rates := []int{8000, 16000, 22050, 24000, 44100, 48000, 11025, 32000, 16001}
	for _, in := range rates {
		for _, out := range rates {
			if in == out {
				continue
			}
			low := min(in, out)
			freq := 0.3 * float64(low) // well inside both pass bands
			src := sineAt(in, in/2, freq, 0.5)
			got, err := Resample(src, in, out, 1)
			if err != nil {
				t.Fatal(err)
			}
			if want := (len(src)*out + in - 1) / in; len(got) != want {
				t.Fatalf("%d→%d: %d frames, want %d", in, out, len(got), want)
			}
			want := sineAt(out, len(got), freq, 0.5)
			edge := out / 20
			if s := snrDB(got, want, edge, len(got)-edge); s < 90 {
				t.Errorf("%d→%d: %.0f Hz sine SNR %.1f dB, want ≥ 90", in, out, freq, s)
			}
		}
	}
}

func TestResampleRejectsAliases(t *testing.T) {
	// a tone above the output Nyquist frequency must vanish when downsampling
	for _, tc := range []struct{ in, out int }{{48000, 16000}, {44100, 16000}, {22050, 8000}, {16000, 8000}} {
		freq := 0.5*float64(tc.out) + 0.04*float64(tc.out) // 4% above Nyquist (after the transition)
		src := sineAt(tc.in, tc.in, freq, 0.9)
		got, _ := Resample(src, tc.in, tc.out, 1)
		edge := tc.out / 10
		rms := RMS(got[edge : len(got)-edge])
		if db := DB(rms / (0.9 / math.Sqrt2)); db > -110 {
			t.Errorf("%d→%d: %.0f Hz leaks at %.1f dB, want ≤ -110", tc.in, tc.out, freq, db)
		}
	}
}

func TestResampleStereoMatchesMono(t *testing.T) {
	l := sineAt(44100, 5000, 1000, 0.5)
	r := sineAt(44100, 5000, 3000, 0.3)
	st := make([]float32, 0, 10000)
	for i := range l {
		st = append(st, l[i], r[i])
	}
	gs, _ := Resample(st, 44100, 16000, 2)
	gl, _ := Resample(l, 44100, 16000, 1)
	gr, _ := Resample(r, 44100, 16000, 1)
	for i := range gl {
		if math.Abs(float64(gs[2*i]-gl[i])) > 1e-6 || math.Abs(float64(gs[2*i+1]-gr[i])) > 1e-6 {
			t.Fatalf("frame %d: stereo (%v,%v) mono (%v,%v)", i, gs[2*i], gs[2*i+1], gl[i], gr[i])
		}
	}
}

func TestResampleErrors(t *testing.T) {
	for _, tc := range []struct{ in, out, ch int }{{0, 16000, 1}, {16000, -1, 1}, {16000, 8000, 0}, {16000, 8000, 1000}} {
		if _, err := NewResampler(tc.in, tc.out, tc.ch, QualityHigh); err == nil {
			t.Errorf("NewResampler(%d, %d, %d) accepted", tc.in, tc.out, tc.ch)
		}
	}
	if _, err := Resample(make([]float32, 3), 16000, 8000, 2); err == nil {
		t.Error("accepted a partial frame")
	}
}

// chunked runs the streaming interface with the given chunk sizes (in frames, cycled).
func chunked(r *Resampler, src []float32, ch int, sizes []int) []float32 {
	var out []float32
	for i, k := 0, 0; i < len(src); k++ {
		n := sizes[k%len(sizes)] * ch
		if i+n > len(src) {
			n = len(src) - i
		}
		out = r.Process(out, src[i:i+n])
		i += n
	}
	return r.Flush(out)
}

func TestResampleChunkingInvariant(t *testing.T) {
	src := sineAt(44100, 20000, 440, 0.5)
	r, _ := NewResampler(44100, 16000, 1, QualityHigh)
	whole := chunked(r, src, 1, []int{len(src)})
	for _, sizes := range [][]int{{1}, {7, 1, 300}, {4096}, {0, 5}} {
		got := chunked(r, src, 1, sizes) // Flush resets, so r is reused
		if len(got) != len(whole) {
			t.Fatalf("chunks %v: %d frames, want %d", sizes, len(got), len(whole))
		}
		for i := range got {
			if got[i] != whole[i] {
				t.Fatalf("chunks %v: frame %d differs", sizes, i)
			}
		}
	}
}

func FuzzResampleChunking(f *testing.F) {
	f.Add(uint16(44100), uint16(16000), uint8(1), []byte{3, 200, 1, 17})
	f.Add(uint16(8000), uint16(48000), uint8(2), []byte{1})
	f.Add(uint16(16001), uint16(16000), uint8(1), []byte{255, 0, 9})
	f.Add(uint16(16000), uint16(16000), uint8(3), []byte{2, 5})
	f.Fuzz(func(t *testing.T, in, out uint16, ch uint8, chunks []byte) {
		if in < 1000 || out < 1000 || ch == 0 || ch > 4 || len(chunks) == 0 || len(chunks) > 64 {
			t.Skip()
		}
		if max(in, out)/min(in, out) > 8 {
			t.Skip() // keep filters (and the test) small
		}
		c := int(ch)
		frames := 1500
		src := make([]float32, frames*c)
		var seed uint32 = 12345
		for i := range src {
			seed = seed*1664525 + 1013904223
			src[i] = float32(int32(seed)>>8) / (1 << 23)
		}
		r1, err := NewResampler(int(in), int(out), c, QualityLow)
		if err != nil {
			t.Fatal(err)
		}
		want := chunked(r1, src, c, []int{frames})
		sizes := make([]int, len(chunks))
		nonzero := false
		for i, b := range chunks {
			sizes[i] = int(b)
			nonzero = nonzero || b != 0
		}
		if !nonzero {
			sizes = append(sizes, 1) // empty chunks are allowed but must not be all there is
		}
		got := chunked(r1, src, c, sizes)
		if len(got) != len(want) {
			t.Fatalf("%d frames chunked, %d whole", len(got), len(want))
		}
		if int64(len(want)/c) != r1.OutputFrames(int64(frames)) {
			t.Fatalf("%d output frames, want %d", len(want)/c, r1.OutputFrames(int64(frames)))
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("sample %d: %v vs %v", i, got[i], want[i])
			}
		}
	})
}
