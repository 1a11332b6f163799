package tokenizer

import "container/heap"

// shortPiece is the length up to which the quadratic merge loop beats the heap.
const shortPiece = 48

// bpe encodes one pre-tokenized piece: its bytes become byte-level symbols, then the
// lowest-ranked adjacent pair is merged (leftmost first among equal ranks) until none is left.
func (t *Tokenizer) bpe(piece string) []int {
	if piece == "" {
		return nil
	}
	if t.ignoreM {
		if id, ok := t.vocab[string(appendByteRunes(nil, piece))]; ok {
			return []int{id}
		}
	}
	syms := make([]int, len(piece))
	for i := 0; i < len(piece); i++ {
		syms[i] = t.byteID[piece[i]]
	}
	if len(syms) <= shortPiece {
		return t.mergeShort(syms)
	}
	return t.mergeHeap(syms)
}

func (t *Tokenizer) mergeShort(syms []int) []int {
	for len(syms) > 1 {
		best, at := merge{rank: -1}, -1
		for i := 0; i+1 < len(syms); i++ {
			m, ok := t.merges[pairKey(syms[i], syms[i+1])]
			if ok && (at < 0 || m.rank < best.rank) {
				best, at = m, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] = best.id
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	return syms
}

// candidate is a pair that may merge: the symbols at pos and its right neighbour.
type candidate struct {
	rank, pos   int
	left, right int // the ids it was made for (stale entries no longer match)
	id          int
}

type candHeap []candidate

func (h candHeap) Len() int { return len(h) }
func (h candHeap) Less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].pos < h[j].pos
}
func (h candHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(x any)   { *h = append(*h, x.(candidate)) }
func (h *candHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// mergeHeap is mergeShort in O(n log n) for long pieces (runs of spaces or symbols).
func (t *Tokenizer) mergeHeap(syms []int) []int {
	n := len(syms)
	prev := make([]int, n)
	next := make([]int, n)
	alive := make([]bool, n)
	for i := range n {
		prev[i], next[i], alive[i] = i-1, i+1, true
	}
	next[n-1] = -1
	h := &candHeap{}
	push := func(i int) {
		j := next[i]
		if i < 0 || j < 0 {
			return
		}
		if m, ok := t.merges[pairKey(syms[i], syms[j])]; ok {
			heap.Push(h, candidate{rank: m.rank, pos: i, left: syms[i], right: syms[j], id: m.id})
		}
	}
	for i := 0; i+1 < n; i++ {
		push(i)
	}
	for h.Len() > 0 {
		c := heap.Pop(h).(candidate)
		i := c.pos
		j := next[i]
		if !alive[i] || j < 0 || syms[i] != c.left || syms[j] != c.right {
			continue // stale
		}
		syms[i] = c.id
		alive[j] = false
		next[i] = next[j]
		if next[j] >= 0 {
			prev[next[j]] = i
		}
		if p := prev[i]; p >= 0 {
			push(p)
		}
		push(i)
	}
	out := make([]int, 0, n)
	for i := 0; i >= 0; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}
