package builtin

import (
	"context"
	"math"
	"time"
)

// prefillChunk bounds the tokens fed in one step, so a long prompt's logits buffer
// (tokens × vocabulary) stays small.
const prefillChunk = 512

// GenOptions bound one generation.
type GenOptions struct {
	Sampling
	MaxTokens int  // 0: up to the context window
	MinTokens int  // end-of-sequence tokens are masked until this many were produced
	IgnoreEOS bool // keep going past end-of-sequence tokens (benchmarks)
}

// Stats describe one generation.
type Stats struct {
	PromptTokens int           // tokens in the prompt
	Reused       int           // prompt tokens whose keys and values came from the cache
	Generated    int           // tokens produced
	FirstToken   time.Duration // from the call to the first token
	Total        time.Duration
	Model        time.Duration // inside ONNX Runtime's Run calls
	Stopped      string        // "eos", "length", "context", or "" when fn stopped it
	// After the first token: wall time and the part inside ONNX Runtime (loop overhead is
	// the difference).
	Decode, DecodeModel time.Duration
}

// Generate continues the sequence with prompt (reusing the longest cached prefix) and samples
// tokens, calling fn with each until an end-of-sequence token, MaxTokens, the context window,
// fn returning an error (returned as is; ErrStop ends quietly) or ctx ending.
func (s *Sequence) Generate(ctx context.Context, prompt []int, o GenOptions, fn func(id int) error) (st Stats, _ error) {
	start := time.Now()
	st = Stats{PromptTokens: len(prompt)}
	run0 := s.runTime
	var decodeStart time.Time
	var run1 time.Duration
	defer func() {
		st.Model = s.runTime - run0
		if !decodeStart.IsZero() {
			st.Decode = time.Since(decodeStart)
			st.DecodeModel = s.runTime - run1
		}
	}()
	if len(prompt) == 0 {
		return st, nil
	}
	common := 0
	for common < len(prompt) && common < len(s.tokens) && s.tokens[common] == prompt[common] {
		common++
	}
	if common == len(prompt) {
		common-- // the last prompt token must be fed to get logits
	}
	s.Truncate(common)
	st.Reused = common
	var logits []float32
	var err error
	feed := func(ids []int) error {
		logits, err = s.Feed(ctx, ids)
		st.Model = s.runTime - run0
		return err
	}
	for rest := prompt[common:]; len(rest) > 0; {
		n := min(len(rest), prefillChunk)
		if err := feed(rest[:n]); err != nil {
			st.Total = time.Since(start)
			return st, err
		}
		rest = rest[n:]
	}
	sm := newSampler(o.Sampling, prompt)
	limit := o.MaxTokens
	if limit <= 0 || limit > s.m.Context-len(prompt) {
		limit = s.m.Context - len(prompt)
	}
	for {
		if st.Generated < o.MinTokens {
			for id := range s.m.eos {
				if id < len(logits) {
					logits[id] = float32(math.Inf(-1))
				}
			}
		}
		id := sm.next(logits)
		sm.observe(id)
		if st.Generated == 0 {
			st.FirstToken = time.Since(start)
			decodeStart, run1 = time.Now(), s.runTime
		}
		if s.m.eos[id] && !o.IgnoreEOS {
			st.Stopped = "eos"
			st.Total = time.Since(start)
			return st, nil
		}
		st.Generated++
		if err := fn(id); err != nil {
			st.Total = time.Since(start)
			if err == ErrStop {
				return st, nil
			}
			return st, err
		}
		if st.Generated >= limit {
			st.Stopped = "length"
			if len(s.tokens)+1 > s.m.Context {
				st.Stopped = "context"
			}
			st.Total = time.Since(start)
			return st, nil
		}
		if len(s.tokens)+1 > s.m.Context {
			st.Stopped = "context"
			st.Total = time.Since(start)
			return st, nil
		}
		if err := feed([]int{id}); err != nil {
			st.Total = time.Since(start)
			return st, err
		}
	}
}

// ErrStop, returned by Generate's fn, ends generation without an error.
var ErrStop = stopError{}

type stopError struct{}

func (stopError) Error() string { return "builtin: stop" }
