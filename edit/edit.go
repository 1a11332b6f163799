// Package edit measures how far apart two sequences are: the Levenshtein distance that word
// and character error rates, fuzzy command matching and label checks all count with.
package edit

import "slices"

// Distance is the number of insertions, deletions and substitutions that turn a into b.
func Distance[T comparable](a, b []T) int {
	return lastRow(a, b)[len(b)]
}

// Runes is Distance over the characters of two strings.
func Runes(a, b string) int { return Distance([]rune(a), []rune(b)) }

// Prefix is the distance from a to the closest prefix of b (a name typed halfway).
func Prefix(a, b string) int { return slices.Min(lastRow([]rune(a), []rune(b))) }

// lastRow is the last row of the edit-distance table: element j is the distance from a to
// b[:j].
func lastRow[T comparable](a, b []T) []int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev
}
