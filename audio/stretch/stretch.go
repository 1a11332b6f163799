// Package stretch changes the tempo of speech without changing its pitch, on a stream:
// WSOLA (waveform-similarity overlap-add). Each output frame is the input frame near where the
// tempo puts it that best continues the previous one, so voiced periods line up and the voice
// keeps its pitch and timbre.
package stretch

import "math"

// Stretcher time-scales one stream. Push audio as it comes; Flush at its end. Output does
// not depend on how the input was cut into pushes.
type Stretcher struct {
	speed    float64 // > 1: faster (shorter)
	n, hs    int     // frame length, synthesis hop (n/2)
	tol      int     // how far from its ideal position a frame may be taken
	win      []float32
	in       []float32 // input from inBase on
	inBase   int
	inTotal  int       // samples pushed
	k        int       // next frame
	prev     int       // absolute input position of the last frame taken (-1: none yet)
	ola      []float32 // the overlap tail of the last frame (hs samples)
	produced int
	flushed  bool
}

// New returns a stretcher for audio at rate Hz played speed times as fast (0.25..4). At speed
// 1 the audio passes through unchanged.
func New(rate int, speed float64) *Stretcher {
	if !(speed >= 0.25) || speed > 4 { // also NaN
		speed = 1
	}
	n := int(float64(rate) * 0.03) // 30 ms frames: at least two periods of a low voice
	n -= n % 2
	if n < 16 {
		n = 16
	}
	s := &Stretcher{speed: speed, n: n, hs: n / 2, tol: rate / 100, prev: -1}
	if s.tol < 2 {
		s.tol = 2
	}
	s.win = make([]float32, n)
	for i := range s.win { // periodic Hann: at hop n/2 the windows sum to 1
		s.win[i] = float32(0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(n)))
	}
	s.ola = make([]float32, s.hs)
	return s
}

// Speed is the tempo factor in use.
func (s *Stretcher) Speed() float64 { return s.speed }

// Push adds input and returns the output that is final.
func (s *Stretcher) Push(x []float32) []float32 {
	if s.flushed {
		return nil
	}
	if s.speed == 1 {
		s.inTotal += len(x)
		s.produced += len(x)
		return append([]float32(nil), x...)
	}
	s.in = append(s.in, x...)
	s.inTotal += len(x)
	return s.run(false)
}

// Flush ends the stream: the rest of the output, trimmed so that the whole output is the
// input's length over the speed.
func (s *Stretcher) Flush() []float32 {
	if s.flushed || s.speed == 1 {
		s.flushed = true
		return nil
	}
	s.flushed = true
	return s.run(true)
}

// at is the input sample at absolute position i (0 past the end or before the kept part).
func (s *Stretcher) at(i int) float32 {
	j := i - s.inBase
	if j < 0 || j >= len(s.in) {
		return 0
	}
	return s.in[j]
}

func (s *Stretcher) run(final bool) []float32 {
	want := int(math.Round(float64(s.inTotal) / s.speed)) // the whole output, once flushed
	var out []float32
	for {
		ideal := int(math.Round(float64(s.k) * float64(s.hs) * s.speed))
		// the frame's candidates reach ideal+tol+n; the template prev+hs+n
		need := ideal + s.tol + s.n
		if s.prev >= 0 && s.prev+s.hs+s.n > need {
			need = s.prev + s.hs + s.n
		}
		if !final && need > s.inTotal {
			break
		}
		if final && s.produced >= want {
			break
		}
		p := s.best(ideal)
		// overlap-add: the frame's first half completes the held tail; its second half is held
		frame := make([]float32, s.hs)
		for i := 0; i < s.hs; i++ {
			frame[i] = s.ola[i] + s.win[i]*s.at(p+i)
			s.ola[i] = s.win[s.hs+i] * s.at(p+s.hs+i)
		}
		if s.k == 0 {
			// the first frame has no predecessor: its rising half is the signal itself
			for i := 0; i < s.hs; i++ {
				frame[i] = s.at(p + i)
			}
		}
		s.prev = p
		s.k++
		if final && s.produced+len(frame) > want {
			frame = frame[:want-s.produced]
		}
		s.produced += len(frame)
		out = append(out, frame...)
		s.trim()
	}
	return out
}

// best is the start near ideal whose frame best continues the last one taken: the highest
// normalised correlation with the last frame's natural continuation.
func (s *Stretcher) best(ideal int) int {
	if s.prev < 0 {
		return max(0, ideal)
	}
	tmpl := s.prev + s.hs
	lo, hi := max(0, ideal-s.tol), ideal+s.tol
	bestP, bestC := max(0, ideal), math.Inf(-1)
	const step = 2 // half the positions, then refined around the best
	score := func(p int) float64 {
		var xy, yy float64
		for i := 0; i < s.n; i += 2 {
			a, b := float64(s.at(tmpl+i)), float64(s.at(p+i))
			xy += a * b
			yy += b * b
		}
		if yy == 0 {
			return 0
		}
		return xy / math.Sqrt(yy)
	}
	for p := lo; p <= hi; p += step {
		if c := score(p); c > bestC {
			bestP, bestC = p, c
		}
	}
	for _, p := range []int{bestP - 1, bestP + 1} {
		if p >= lo && p <= hi {
			if c := score(p); c > bestC {
				bestP, bestC = p, c
			}
		}
	}
	return bestP
}

// trim drops input no later frame can reach.
func (s *Stretcher) trim() {
	next := int(math.Round(float64(s.k)*float64(s.hs)*s.speed)) - s.tol
	if s.prev >= 0 && s.prev+s.hs < next {
		next = s.prev + s.hs
	}
	if drop := next - s.inBase; drop > 4096 && drop <= len(s.in) {
		s.in = append(s.in[:0], s.in[drop:]...)
		s.inBase += drop
	}
}
