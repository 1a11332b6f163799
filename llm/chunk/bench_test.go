package chunk

import (
	"strings"
	"testing"
	"time"
)

const benchText = `Sure! Here is what I found. The meeting with Dr. Smith is at 3.30 this afternoon, ` +
	`and it should take about 1.5 hours. You asked me to remind you about the report; I'll do that at 5 p.m. today. ` +
	`好的，我来帮你查一下。明天北京晴，最高气温二十三度；后天有小雨，记得带伞！ ` +
	`Anything else? [laugh] I can also set timers, convert units, or do quick maths for you. `

func benchTokens(n int) []string {
	return tokens(strings.Repeat(benchText, n), 4, 3, 1, 5, 2)
}

// BenchmarkChunker measures chunker throughput per token, against a bare loop that only
// appends tokens and looks for a full stop (the least any splitter must do), in the same run.
func BenchmarkChunker(b *testing.B) {
	toks := benchTokens(50)
	var bytes int64
	for _, t := range toks {
		bytes += int64(len(t))
	}
	b.SetBytes(bytes)

	// Baseline first, same b.N, same tokens.
	bstart := time.Now()
	for i := 0; i < b.N; i++ {
		var sb strings.Builder
		for _, t := range toks {
			sb.WriteString(t)
			if strings.ContainsAny(t, ".!?。！？") {
				sb.Reset()
			}
		}
	}
	basePerTok := float64(time.Since(bstart).Nanoseconds()) / float64(b.N*len(toks))

	b.ResetTimer()
	start := time.Now()
	c := New(DefaultOptions())
	for i := 0; i < b.N; i++ {
		c.Reset()
		for _, t := range toks {
			c.Push(t)
		}
		c.Flush()
	}
	el := time.Since(start)
	perTok := float64(el.Nanoseconds()) / float64(b.N*len(toks))
	b.ReportMetric(perTok, "ns/token")
	b.ReportMetric(basePerTok, "baseline-ns/token")
	b.ReportMetric(perTok/basePerTok, "x-baseline")
}

// BenchmarkEmissionDelay reports how many tokens pass between the token that completes a
// sentence and that sentence's emission. It must be 0 for plain sentence ends.
func BenchmarkEmissionDelay(b *testing.B) {
	// Sentence ends that need no lookahead (no decimals or abbreviations at the end).
	text := strings.Repeat("The answer is ready. Is that all? Yes it is! 好的。明天见！ Done; bye now… ", 20)
	toks := tokens(text, 4, 3, 1, 5, 2)
	var delays, sentences int
	for i := 0; i < b.N; i++ {
		c := New(DefaultOptions())
		pending := []int{} // token indexes of completed-but-unemitted sentence ends
		delays, sentences = 0, 0
		for k, t := range toks {
			if strings.ContainsAny(t, ".!?;。！？…") {
				pending = append(pending, k)
			}
			for range c.Push(t) {
				if len(pending) == 0 {
					continue
				}
				delays += k - pending[0]
				pending = pending[1:]
				sentences++
			}
		}
		c.Flush()
	}
	if sentences == 0 {
		b.Fatal("no sentences emitted")
	}
	b.ReportMetric(float64(delays)/float64(sentences), "delay-tokens")
	b.ReportMetric(float64(sentences), "sentences")
}
