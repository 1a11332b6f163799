package skills

import (
	"context"

	"github.com/parley-voice/parley/llm"
)

// ModelID is the name the offline skills answer under when used as an llm.Backend.
const ModelID = "parley-skills"

// Backend presents the engine as an llm.Backend (for example behind an OpenAI-compatible
// /v1/chat/completions endpoint when no model is configured): it answers the last user
// message with Handle, then finishes with estimated token counts. Actions are not
// expressible as chat deltas; callers that need them use Handle or brain.Brain.
type Backend struct{ E *Engine }

// Name implements llm.Backend.
func (b Backend) Name() string { return "skills" }

// URL implements llm.Backend.
func (b Backend) URL() string { return "offline" }

// Chat implements llm.Backend.
func (b Backend) Chat(ctx context.Context, req *llm.Request, fn func(llm.Delta) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	text := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == llm.RoleUser {
			text = req.Messages[i].Content
			break
		}
	}
	r, err := b.E.Handle(ctx, text)
	if err != nil && r.Text == "" {
		return err
	}
	if err := fn(llm.Delta{Content: r.Text}); err != nil {
		return err
	}
	in, out := llm.EstimateTokens(text), llm.EstimateTokens(r.Text)
	return fn(llm.Delta{FinishReason: llm.FinishStop, Usage: &llm.Usage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out}})
}

// Models implements llm.Backend.
func (b Backend) Models(context.Context) ([]llm.Model, error) {
	return []llm.Model{{ID: ModelID, Family: "offline skills"}}, nil
}

// Health implements llm.Backend.
func (b Backend) Health(context.Context) error { return nil }
