// Package pcmbuf grows sample buffers whose memory is reserved from a budget that many
// connections share, so a server bounds what all its realtime sessions and Wyoming
// connections buffer at once.
package pcmbuf

// Budget is memory shared by many buffers, in bytes.
type Budget interface {
	Reserve(n int64) bool
	Release(n int64)
}

// Grow returns buf with room for n more samples and the bytes it reserved from budget (nil:
// unbounded) for the capacity it added; ok is false, and buf is returned as it was, when the
// budget has no room. Growth is by a quarter (at least minGrow samples), not doubling, so a
// long buffer holds little slack.
func Grow(buf []float32, n, minGrow int, budget Budget) (_ []float32, reserved int64, ok bool) {
	need := len(buf) + n
	if need <= cap(buf) {
		return buf, 0, true
	}
	c := max(need, cap(buf)+cap(buf)/4, cap(buf)+minGrow)
	reserved = int64(c-cap(buf)) * 4
	if budget != nil && !budget.Reserve(reserved) {
		return buf, 0, false
	}
	grown := make([]float32, len(buf), c)
	copy(grown, buf)
	return grown, reserved, true
}
