package audio

import (
	"fmt"
	"math"
)

// Quality selects a resampling filter. All are linear-phase Kaiser-windowed sinc filters whose
// stop band starts at the lower rate's Nyquist frequency (no aliasing above the stated
// rejection). The presets follow sox's rate effect: "95% bandwidth" means the response is
// −3 dB at 95% of the lower Nyquist frequency, and the flat pass band ends earlier, where
// sox puts it (sox's rate.c: 0 dB edge = 100% − (100% − bw₃dB) / (0.646 + (1.6e-6·A − 7.5e-4)·A)).
type Quality int

const (
	QualityHigh   Quality = iota // −3 dB at 95%, 125 dB rejection: sox rate -h; the default
	QualityMedium                // −3 dB at 95%, 100 dB rejection: sox rate -m
	QualityLow                   // −3 dB at 85%, 80 dB rejection; about 3× cheaper than High
	QualityVery                  // −3 dB at 95%, 150 dB rejection (sox -v has 175; float32 stops near 150)
)

func (q Quality) params() (passband, atten float64) {
	bw3, atten := 0.95, 125.0
	switch q {
	case QualityMedium:
		atten = 100
	case QualityLow:
		bw3, atten = 0.85, 80
	case QualityVery:
		atten = 150
	}
	to3dB := 0.646 + (1.6e-6*atten-7.5e-4)*atten
	return 1 - (1-bw3)/to3dB, atten
}

// maxPhases is the largest polyphase table kept exactly; conversions whose reduced ratio has a
// larger interpolation factor interpolate linearly between maxPhases table rows.
const maxPhases = 1024

// Resampler converts interleaved audio between two sample rates with a polyphase windowed-sinc
// filter. Rates are tracked as an exact rational ratio, so the output does not drift and does
// not depend on how the input is chunked. It is not safe for concurrent use.
type Resampler struct {
	in, out, ch int
	l, m        int64 // out/in = l/m, reduced
	k           int   // taps per output (in input frames), even
	phases      int   // table rows (l, or maxPhases when interpolating)
	interp      bool
	coef        []float32 // phases(+1) rows of k taps

	hist []float32 // interleaved input frames starting at absolute frame index base
	base int64
	i0   int64 // input index of the next output
	p    int64 // its phase numerator, in [0, l)
	nIn  int64 // input frames seen
	nOut int64 // output frames produced
}

// NewResampler makes a streaming resampler for channels-channel audio from inRate to outRate.
func NewResampler(inRate, outRate, channels int, q Quality) (*Resampler, error) {
	if err := (Format{inRate, channels}).Validate(); err != nil {
		return nil, fmt.Errorf("resampler input: %w", err)
	}
	if err := (Format{outRate, channels}).Validate(); err != nil {
		return nil, fmt.Errorf("resampler output: %w", err)
	}
	g := gcd(inRate, outRate)
	r := &Resampler{in: inRate, out: outRate, ch: channels, l: int64(outRate / g), m: int64(inRate / g)}
	r.design(q)
	r.Reset()
	return r, nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func (r *Resampler) design(q Quality) {
	pb, atten := q.params()
	if r.in == r.out {
		r.k, r.phases = 0, 1
		return
	}
	scale := 1.0 // lower rate / input rate
	if r.out < r.in {
		scale = float64(r.out) / float64(r.in)
	}
	// Kaiser: taps at the lower rate for a transition of (1-pb) of its Nyquist band.
	dw := math.Pi * (1 - pb)
	nLow := (atten - 7.95) / (2.285 * dw)
	k := int(math.Ceil(nLow/scale)) + 1
	k += k & 1
	r.k = k
	beta := 0.1102 * (atten - 8.7)
	fc := 0.5 * scale * (1 + pb) / 2 // cutoff in cycles per input sample
	r.phases = int(r.l)
	rows := r.phases
	if r.l > maxPhases {
		r.phases, r.interp = maxPhases, true
		rows = maxPhases + 1
	}
	r.coef = make([]float32, rows*k)
	half := float64(k) / 2
	i0b := besselI0(beta)
	for p := 0; p < rows; p++ {
		frac := float64(p) / float64(r.phases)
		for j := 0; j < k; j++ {
			tau := frac + half - 1 - float64(j) // output time minus input time, in input samples
			var v float64
			if x := tau / half; x > -1 && x < 1 {
				v = 2 * fc * sinc(2*fc*tau) * besselI0(beta*math.Sqrt(1-x*x)) / i0b
			}
			r.coef[p*k+j] = float32(v)
		}
	}
}

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	return math.Sin(math.Pi*x) / (math.Pi * x)
}

func besselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	for i := 1; i < 500; i++ {
		term *= (x / (2 * float64(i))) * (x / (2 * float64(i)))
		sum += term
		if term < sum*1e-17 {
			break
		}
	}
	return sum
}

// Reset forgets all input, as if newly made.
func (r *Resampler) Reset() {
	pre := r.k/2 - 1
	if pre < 0 {
		pre = 0
	}
	r.hist = append(r.hist[:0], make([]float32, pre*r.ch)...)
	r.base = -int64(pre)
	r.i0, r.p, r.nIn, r.nOut = 0, 0, 0, 0
}

// Rates returns the input and output rates.
func (r *Resampler) Rates() (in, out int) { return r.in, r.out }

// Taps is the filter length per output sample, in input frames (0 when the rates are equal).
func (r *Resampler) Taps() int { return r.k }

// OutputFrames is the number of frames a complete conversion of n input frames produces:
// ceil(n × out / in).
func (r *Resampler) OutputFrames(n int64) int64 { return (n*r.l + r.m - 1) / r.m }

// Process resamples src (whole frames) and appends the output that is ready to dst. The output
// lags the input by half the filter length; Flush emits the rest.
func (r *Resampler) Process(dst, src []float32) []float32 {
	n := len(src) / r.ch * r.ch
	r.nIn += int64(n / r.ch)
	if r.k == 0 {
		r.nOut += int64(n / r.ch)
		return append(dst, src[:n]...)
	}
	r.hist = append(r.hist, src[:n]...)
	return r.run(dst, r.base+int64(len(r.hist)/r.ch), -1)
}

// Flush emits the remaining output for the input so far (so that the total is
// OutputFrames(input frames)) and resets the resampler for a new stream.
func (r *Resampler) Flush(dst []float32) []float32 {
	if r.k != 0 {
		want := r.OutputFrames(r.nIn)
		r.hist = append(r.hist, make([]float32, (r.k/2+1)*r.ch)...)
		dst = r.run(dst, r.base+int64(len(r.hist)/r.ch), want)
	}
	r.Reset()
	return dst
}

// run produces outputs while their taps lie below avail (absolute frame index) and, when
// limit ≥ 0, while fewer than limit outputs exist in total.
func (r *Resampler) run(dst []float32, avail, limit int64) []float32 {
	k, ch, half := r.k, r.ch, int64(r.k/2)
	for r.i0+half < avail && (limit < 0 || r.nOut < limit) {
		start := int(r.i0-half+1-r.base) * ch
		x := r.hist[start : start+k*ch]
		if r.interp {
			pos := float64(r.p) * float64(r.phases) / float64(r.l)
			row := int(pos)
			t := float32(pos - float64(row))
			c0 := r.coef[row*k : row*k+k]
			c1 := r.coef[(row+1)*k : (row+1)*k+k]
			for c := 0; c < ch; c++ {
				a := dotStride(c0, x, c, ch)
				b := dotStride(c1, x, c, ch)
				dst = append(dst, a+(b-a)*t)
			}
		} else {
			cf := r.coef[int(r.p)*k : int(r.p)*k+k]
			if ch == 1 {
				dst = append(dst, dot(cf, x))
			} else {
				for c := 0; c < ch; c++ {
					dst = append(dst, dotStride(cf, x, c, ch))
				}
			}
		}
		r.nOut++
		r.p += r.m
		r.i0 += r.p / r.l
		r.p %= r.l
	}
	// drop input no longer needed
	keep := r.i0 - half + 1
	if drop := int(keep - r.base); drop > 0 {
		if drop*ch > len(r.hist) {
			drop = len(r.hist) / ch
		}
		if drop*ch >= len(r.hist)/2 || drop*ch > 1<<16 {
			n := copy(r.hist, r.hist[drop*ch:])
			r.hist = r.hist[:n]
			r.base += int64(drop)
		}
	}
	return dst
}

func dot(c, x []float32) float32 {
	x = x[:len(c)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(c); i += 4 {
		s0 += c[i] * x[i]
		s1 += c[i+1] * x[i+1]
		s2 += c[i+2] * x[i+2]
		s3 += c[i+3] * x[i+3]
	}
	for ; i < len(c); i++ {
		s0 += c[i] * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotStride(c, x []float32, off, stride int) float32 {
	var s0, s1 float32
	j := off
	i := 0
	for ; i+2 <= len(c); i += 2 {
		s0 += c[i] * x[j]
		s1 += c[i+1] * x[j+stride]
		j += 2 * stride
	}
	for ; i < len(c); i++ {
		s0 += c[i] * x[j]
		j += stride
	}
	return s0 + s1
}

// Resample converts a whole interleaved signal with QualityHigh; the result has
// ceil(frames × outRate / inRate) frames.
func Resample(src []float32, inRate, outRate, channels int) ([]float32, error) {
	r, err := NewResampler(inRate, outRate, channels, QualityHigh)
	if err != nil {
		return nil, err
	}
	if len(src)%channels != 0 {
		return nil, fmt.Errorf("%w: %d samples is not a whole number of %d-channel frames", ErrFormat, len(src), channels)
	}
	dst := make([]float32, 0, r.OutputFrames(int64(len(src)/channels))*int64(channels))
	dst = r.Process(dst, src)
	return r.Flush(dst), nil
}

// ResampleBuffer returns b converted to rate (b itself when the rate already matches).
func ResampleBuffer(b *Buffer, rate int) (*Buffer, error) {
	if b.SampleRate == rate {
		return b, nil
	}
	d, err := Resample(b.Data, b.SampleRate, rate, b.Channels)
	if err != nil {
		return nil, err
	}
	return &Buffer{Format: Format{SampleRate: rate, Channels: b.Channels}, Data: d}, nil
}
