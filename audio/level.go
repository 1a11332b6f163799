package audio

import "math"

// MinDB is the floor reported for silence, so levels stay finite (and JSON-encodable).
const MinDB = -120.0

// ClipThreshold is the magnitude at or above which a sample counts as clipped: full scale of
// 16-bit audio minus one step.
const ClipThreshold = 32767.0 / 32768

// Levels summarises a block of samples. dBFS here is relative to a full-scale square wave, so
// a full-scale sine has RMS −3.01 dBFS and peak 0 dBFS.
type Levels struct {
	RMS     float64 `json:"rms_dbfs"`
	Peak    float64 `json:"peak_dbfs"`
	Clipped int     `json:"clipped"` // samples at or beyond ClipThreshold
	Samples int     `json:"samples"`
}

// DB converts a linear amplitude to dBFS, floored at MinDB.
func DB(amplitude float64) float64 {
	if amplitude <= 0 {
		return MinDB
	}
	return math.Max(MinDB, 20*math.Log10(amplitude))
}

// FromDB converts dB to a linear amplitude (gain) factor.
func FromDB(db float64) float64 { return math.Pow(10, db/20) }

// Measure computes the levels of p.
func Measure(p []float32) Levels {
	var m Meter
	m.Add(p)
	return m.Levels()
}

// Meter accumulates levels over a stream; the zero value is ready. Reset starts a new window.
type Meter struct {
	sum     float64
	peak    float32
	clipped int
	n       int
}

// Add accumulates p.
func (m *Meter) Add(p []float32) {
	var sum float64
	peak := m.peak
	for _, v := range p {
		a := v
		if a < 0 {
			a = -a
		}
		if a > peak {
			peak = a
		}
		if a >= ClipThreshold {
			m.clipped++
		}
		sum += float64(v) * float64(v)
	}
	m.sum += sum
	m.peak = peak
	m.n += len(p)
}

// Levels reports the accumulated levels.
func (m *Meter) Levels() Levels {
	l := Levels{RMS: MinDB, Peak: DB(float64(m.peak)), Clipped: m.clipped, Samples: m.n}
	if m.n > 0 {
		l.RMS = DB(math.Sqrt(m.sum / float64(m.n)))
	}
	return l
}

// Reset clears the meter.
func (m *Meter) Reset() { *m = Meter{} }

// RMS is the root-mean-square amplitude of p (linear).
func RMS(p []float32) float64 {
	if len(p) == 0 {
		return 0
	}
	var s float64
	for _, v := range p {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s / float64(len(p)))
}

// Peak is the largest magnitude in p.
func Peak(p []float32) float32 {
	var pk float32
	for _, v := range p {
		if v < 0 {
			v = -v
		}
		if v > pk {
			pk = v
		}
	}
	return pk
}

// CountClipped counts the samples of p at or beyond ClipThreshold in magnitude.
func CountClipped(p []float32) int {
	n := 0
	for _, v := range p {
		if v >= ClipThreshold || v <= -ClipThreshold {
			n++
		}
	}
	return n
}

// Gain multiplies p by g in place.
func Gain(p []float32, g float32) {
	for i := range p {
		p[i] *= g
	}
}

// GainDB multiplies p in place by the gain of db decibels.
func GainDB(p []float32, db float64) { Gain(p, float32(FromDB(db))) }

// Clip limits p to [-1, 1] in place and returns how many samples it changed.
func Clip(p []float32) int {
	n := 0
	for i, v := range p {
		if v > 1 {
			p[i], n = 1, n+1
		} else if v < -1 {
			p[i], n = -1, n+1
		} else if v != v {
			p[i], n = 0, n+1
		}
	}
	return n
}

// DownMix appends the average of each frame of the channels-channel src to dst (mono).
func DownMix(dst, src []float32, channels int) []float32 {
	if channels <= 1 {
		return append(dst, src...)
	}
	frames := len(src) / channels
	inv := 1 / float32(channels)
	for f := 0; f < frames; f++ {
		var s float32
		for _, v := range src[f*channels : f*channels+channels] {
			s += v
		}
		dst = append(dst, s*inv)
	}
	return dst
}

// UpMix appends mono src to dst duplicated into channels channels.
func UpMix(dst, src []float32, channels int) []float32 {
	for _, v := range src {
		for c := 0; c < channels; c++ {
			dst = append(dst, v)
		}
	}
	return dst
}

// Mix adds src into dst (element-wise, up to the shorter length) scaled by g.
func Mix(dst, src []float32, g float32) {
	n := min(len(dst), len(src))
	for i := 0; i < n; i++ {
		dst[i] += src[i] * g
	}
}
