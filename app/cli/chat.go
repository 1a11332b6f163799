package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/llm/brain"
	"github.com/parley-voice/parley/llm/discover"
	"github.com/parley-voice/parley/llm/ollama"
	"github.com/parley-voice/parley/llm/skills"
	"github.com/parley-voice/parley/store"
)

func init() {
	register(&command{
		name:  "chat",
		usage: "chat [--backend B] [--url U] [--model M] [--voice]  talk with Parley (text REPL; --voice: the spoken loop)",
		run:   runChat,
	})
}

// chatFlags are the flags of `parley chat`; --voice hands the rest of the arguments to the
// voice loop (cmd_chat_voice.go) after applying the LLM flags to the configuration.
type chatFlags struct {
	voice      bool
	backend    string
	url        string
	model      string
	think      bool
	tools      bool
	localFirst bool
	maxTokens  int
	timeout    time.Duration
	pull       string
	noTools    bool
	noHistory  bool
	// The spoken loop's own flags, forwarded to chatVoice so they need no "--".
	voiceArgs []string
}

func parseChatFlags(env *cliEnv, args []string) (*chatFlags, []string, error) {
	var f chatFlags
	fs := newFlags(env, "chat", "")
	fs.BoolVar(&f.voice, "voice", false, "run the spoken loop on the default audio devices instead of the text REPL")
	fs.StringVar(&f.backend, "backend", "", "auto | openai | ollama | builtin | skills (default llm.backend)")
	fs.StringVar(&f.url, "url", "", "LLM server base URL (default llm.url, $PARLEY_LLM_URL; empty: discover local servers)")
	fs.StringVar(&f.model, "model", "", "model name (default llm.model, $PARLEY_LLM_MODEL; empty: the server's first)")
	fs.BoolVar(&f.think, "think", false, "show the model's reasoning")
	fs.BoolVar(&f.tools, "tools", false, "show tool calls and their results")
	fs.BoolVar(&f.localFirst, "local-first", true, "answer time, timers, maths, conversions and controls with the offline skills even when a model is configured")
	fs.IntVar(&f.maxTokens, "max-tokens", 0, "answer cap in tokens (default llm.max_tokens)")
	fs.DurationVar(&f.timeout, "timeout", 0, "wall-clock cap per answer, the first one counted from the start (finding the server included); an answer cut by it makes chat exit 1 (default 90s, not an error)")
	fs.BoolVar(&f.noTools, "no-tools", false, "offer the model no tools (for small models that get confused by them)")
	fs.StringVar(&f.pull, "pull", "", "first ask the Ollama server to fetch this model (with progress), then chat with it")
	forward := func(name, usage string, boolean bool) {
		if boolean {
			fs.BoolFunc(name, usage+" (with --voice)", func(v string) error {
				f.voiceArgs = append(f.voiceArgs, "-"+name+"="+v)
				return nil
			})
			return
		}
		fs.Func(name, usage+" (with --voice)", func(v string) error {
			f.voiceArgs = append(f.voiceArgs, "-"+name, v)
			return nil
		})
	}
	forward("mode", "push-to-talk | hands-free | wake-word", false)
	forward("asr-model", "speech recognition model directory or id", false)
	fs.BoolFunc("no-history", "do not record the conversation in the history (`parley history`)", func(v string) error {
		on, err := strconv.ParseBool(v)
		f.noHistory = on
		f.voiceArgs = append(f.voiceArgs, "-no-history="+v) // the spoken loop records too
		return err
	})
	forward("v", "also print states, barge-ins and rejected echoes", true)
	if err := fs.parse(args); err != nil {
		return nil, nil, err
	}
	if f.maxTokens < 0 || f.timeout < 0 {
		return nil, nil, fmt.Errorf("%w: --max-tokens and --timeout must not be negative", errUsage)
	}
	return &f, fs.Args(), nil
}

func runChat(ctx context.Context, env *cliEnv, args []string) error {
	start := time.Now()
	f, rest, err := parseChatFlags(env, args)
	if err != nil {
		return err
	}
	cfg := *env.Config
	if f.backend != "" {
		cfg.LLM.Backend = f.backend
	}
	if f.url != "" {
		cfg.LLM.URL = f.url
	}
	if f.model != "" {
		cfg.LLM.Model = f.model
	}
	if f.maxTokens > 0 {
		cfg.LLM.MaxTokens = f.maxTokens
	}
	if f.pull != "" {
		if f.model == "" {
			cfg.LLM.Model = f.pull
		}
		if cfg.LLM.Backend == "" || cfg.LLM.Backend == "auto" {
			cfg.LLM.Backend = discover.KindOllama
		}
	}
	fac := env.factory()
	if cfg.LLM != env.Config.LLM {
		// chat's flags (--backend, --url, --model, --max-tokens, --pull) change llm.* for this
		// chat alone, so its brain (and with --voice the whole assistant) opens through a
		// factory of that configuration, not the command's
		fac = fac.With(&cfg)
	}
	if f.voice {
		venv := *env
		venv.Config, venv.fac = fac.Config(), fac
		return chatVoice(ctx, &venv, append(f.voiceArgs, rest...))
	}
	if len(rest) > 0 {
		return fmt.Errorf("%w: unexpected arguments %q (chat reads messages from standard input)", errUsage, rest)
	}

	// With --timeout, finding the server counts against the first answer's time.
	dctx, dcancel := ctx, context.CancelFunc(func() {})
	if f.timeout > 0 {
		dctx, dcancel = context.WithDeadline(ctx, start.Add(f.timeout))
	}
	choice, err := fac.SelectLLM(dctx)
	dcancel()
	if err != nil {
		if f.timeout > 0 && time.Since(start) >= f.timeout {
			return fmt.Errorf("no answer within --timeout %s: %w", f.timeout, err)
		}
		return err
	}
	if choice.Warning != "" {
		fmt.Fprintln(env.Stderr, "parley chat: warning:", choice.Warning)
	}
	if f.pull != "" {
		oc, ok := choice.Backend.(*ollama.Client)
		if !ok {
			return fmt.Errorf("%w: --pull needs an Ollama server (found %s)", errUsage, choice.Name)
		}
		if err := pullModel(ctx, oc, f.pull, env.Stderr); err != nil {
			return err
		}
	}
	sk, err := fac.Skills(assets.DataDir())
	if sk == nil {
		return err
	}
	if err != nil {
		// The file is kept as it is (never overwrite what we cannot read); chat anyway.
		fmt.Fprintf(env.Stderr, "parley chat: warning: %v; timers will not be saved this session\n", err)
	}
	b, err := fac.Brain(factory.Brain{Choice: choice, Skills: sk, LocalFirst: f.localFirst, NoTools: f.noTools,
		Spoken: true, Timeout: f.timeout})
	if err != nil {
		return err
	}

	interactive := chatIsTerminal(env.Stdin)
	fmt.Fprintf(env.Stderr, "parley chat: %s\n", b.Source())
	if interactive {
		fmt.Fprintln(env.Stderr, "Type a message and press Enter; /reset clears the conversation, /quit or Ctrl-D leaves.")
	}
	out := &lockedWriter{w: env.Stdout, atLineStart: true}
	announce := func(t skills.Timer) {
		if interactive {
			fmt.Fprintf(out, "\n[%s] %s\n", t.Kind, sk.Announcement(t))
			return
		}
		out.Line(fmt.Sprintf("[%s] %s\n", t.Kind, sk.Announcement(t))) // between reply lines, never inside one
	}
	// Timers and alarms that fell due while no Parley was running: reported once, as missed,
	// before the first reply (and removed, so a later run does not list them).
	if due, err := sk.Due(ctx); err != nil {
		fmt.Fprintf(env.Stderr, "parley chat: warning: timers: %v\n", err)
	} else {
		for _, t := range due {
			announce(t)
		}
	}
	// The rest are announced as they fall due, piped or not.
	wctx, cancel := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		sk.Watch(wctx, time.Second, announce)
	}()
	defer func() { cancel(); <-watched }()
	hist := openChatHistory(env, f.noHistory)
	defer hist.close()
	timedOut := 0
	opts := brain.REPLOptions{
		Prompt: interactive, ShowReasoning: f.think, ShowTools: f.tools, Errors: env.Stderr,
		OnTurn: func(text string, res brain.Result, err error) {
			if res.FinishReason == llm.FinishTimeout {
				timedOut++
			}
			hist.record(ctx, text, res, err)
		},
	}
	if f.timeout > 0 {
		opts.FirstDeadline = start.Add(f.timeout)
	}
	err = brain.REPL(ctx, b, env.Stdin, out, opts)
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(env.Stdout)
		return nil // Ctrl-C: a normal way to leave
	}
	if err == nil && timedOut > 0 {
		return fmt.Errorf("%d answer(s) cut short by --timeout %s", timedOut, f.timeout)
	}
	return err
}

// chatHistory records a text chat in the history database, as the desktop app records its
// typed turns: one conversation per run, created with the first answer. A database that
// cannot be opened or written is reported once and the chat goes on.
type chatHistory struct {
	s      *store.Store
	conv   int64
	warn   io.Writer
	warned bool
}

func openChatHistory(env *cliEnv, off bool) *chatHistory {
	h := &chatHistory{warn: env.Stderr}
	if off {
		return h
	}
	s, err := env.factory().Store("")
	if err != nil {
		fmt.Fprintf(env.Stderr, "parley chat: warning: history off: %v\n", err)
		return h
	}
	h.s = s
	return h
}

func (h *chatHistory) record(ctx context.Context, text string, res brain.Result, err error) {
	if h.s == nil {
		return
	}
	end := time.Now()
	begin := end.Add(-res.Elapsed)
	user := &store.Turn{Role: store.RoleUser, Text: text, Start: begin, End: begin}
	reply := &store.Turn{Role: store.RoleAssistant, Text: res.Text, Start: begin, End: end}
	if res.FirstToken > 0 {
		reply.Latency.FirstToken = begin.Add(res.FirstToken)
	}
	switch {
	case err != nil:
		reply.Error = err.Error()
	case res.FinishReason == llm.FinishTimeout:
		reply.Error = "the answer reached its time cap"
	}
	werr := func() error {
		if h.conv == 0 {
			c, err := h.s.CreateConversation(ctx, "")
			if err != nil {
				return err
			}
			h.conv = c.ID
		}
		user.ConversationID, reply.ConversationID = h.conv, h.conv
		return h.s.AddTurns(ctx, user, reply)
	}()
	if werr != nil && !h.warned {
		h.warned = true
		fmt.Fprintf(h.warn, "parley chat: warning: not recorded in the history: %v\n", werr)
	}
}

func (h *chatHistory) close() {
	if h.s != nil {
		h.s.Close()
	}
}

// pullModel asks Ollama to fetch model, printing a line per stage and every 10%.
func pullModel(ctx context.Context, c *ollama.Client, model string, w io.Writer) error {
	last, lastPct := "", -1
	err := c.Pull(ctx, model, func(p ollama.Progress) {
		pct := int(p.Fraction() * 100)
		if p.Status != last || (pct >= 0 && pct/10 != lastPct/10) {
			if pct >= 0 {
				fmt.Fprintf(w, "pull %s: %s %d%%\n", model, p.Status, pct)
			} else {
				fmt.Fprintf(w, "pull %s: %s\n", model, p.Status)
			}
			last, lastPct = p.Status, pct
		}
	})
	if err != nil {
		return fmt.Errorf("pull %s: %w", model, err)
	}
	return nil
}

func chatIsTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// lockedWriter serialises the REPL's output and timer announcements. Line holds an
// announcement back while a reply line is half written, so piped output stays line by line.
type lockedWriter struct {
	mu          sync.Mutex
	w           io.Writer
	atLineStart bool
	held        []string
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.w.Write(p)
	if n > 0 {
		l.atLineStart = p[n-1] == '\n'
	}
	if err == nil && l.atLineStart {
		for _, s := range l.held {
			io.WriteString(l.w, s)
		}
		l.held = nil
	}
	return n, err
}

// Line writes s (a whole line) now if the output is at the start of a line, else after the
// current line ends.
func (l *lockedWriter) Line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.atLineStart {
		io.WriteString(l.w, s)
		return
	}
	l.held = append(l.held, s)
}
