package chattts

import (
	"math"
	"math/rand/v2"
)

// RNG is the engine's only source of randomness: a PCG-DXSM generator (math/rand/v2's PCG,
// whose output sequence is part of its specification) with the conversions to floats and
// normals written here, so a seed gives the same draws in every process and Go version. Each
// decode owns one; there is no global state.
type RNG struct {
	pcg   *rand.PCG
	spare float64
	has   bool
}

// NewRNG returns a generator for seed.
func NewRNG(seed uint64) *RNG {
	// the second word only separates Parley's streams from other users of PCG(seed, 0)
	return &RNG{pcg: rand.NewPCG(seed, 0x9e3779b97f4a7c15)}
}

// Uint64 returns 64 random bits.
func (r *RNG) Uint64() uint64 { return r.pcg.Uint64() }

// Float64 returns a uniform value in [0, 1) with 53 random bits.
func (r *RNG) Float64() float64 { return float64(r.pcg.Uint64()>>11) * 0x1p-53 }

// Normal returns a standard normal value (Box–Muller; values come in pairs).
func (r *RNG) Normal() float64 {
	if r.has {
		r.has = false
		return r.spare
	}
	u1 := 1 - r.Float64() // (0, 1]: log is finite
	u2 := r.Float64()
	rad := math.Sqrt(-2 * math.Log(u1))
	r.spare, r.has = rad*math.Sin(2*math.Pi*u2), true
	return rad * math.Cos(2*math.Pi*u2)
}
