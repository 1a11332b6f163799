package brain

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// REPLOptions tune REPL.
type REPLOptions struct {
	Prompt        bool      // print "> " before reading each line (interactive terminals)
	ShowReasoning bool      // print model reasoning (dimmed in brackets)
	ShowTools     bool      // print tool calls and results
	Errors        io.Writer // where turn errors are reported; nil: out
	// FirstDeadline, when set, is when the first answer must be done: the time the caller
	// spent before it (finding the LLM server) counts against that answer's cap.
	FirstDeadline time.Time
	// OnTurn, when set, is called after each answered line with what was said and the
	// result (history, exit status).
	OnTurn func(text string, res Result, err error)
}

// REPL reads one utterance per line from in and writes the streamed answers to out until
// EOF, "/quit" or ctx ends. Commands: /reset forgets the conversation, /help lists commands.
// Reading from a pipe works: without Prompt nothing but answers is written.
func REPL(ctx context.Context, b *Brain, in io.Reader, out io.Writer, opt REPLOptions) error {
	errOut := opt.Errors
	if errOut == nil {
		errOut = out
	}
	// Lines are read on their own goroutine so that a cancelled ctx (Ctrl-C at the prompt)
	// ends REPL at once; a Read that never returns then leaves that goroutine parked until
	// input arrives or in closes (the process is normally leaving by then).
	lines := make(chan string)
	readErr := make(chan error, 1)
	next := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for range next {
			if !sc.Scan() {
				readErr <- sc.Err()
				return
			}
			select {
			case lines <- sc.Text():
			case <-stop:
				return
			}
		}
	}()
	defer close(next)
	for {
		if opt.Prompt {
			fmt.Fprint(out, "> ")
		}
		var text string
		var ok bool
		select {
		case next <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case text, ok = <-lines:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok {
			if opt.Prompt {
				fmt.Fprintln(out)
			}
			if err := <-readErr; err != nil {
				if errors.Is(err, bufio.ErrTooLong) {
					return fmt.Errorf("chat: an input line is longer than 1 MiB")
				}
				return fmt.Errorf("chat: reading input: %w", err)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		line := strings.TrimSpace(text)
		switch line {
		case "":
			continue
		case "/quit", "/exit", "/q":
			return nil
		case "/reset":
			b.Reset()
			fmt.Fprintln(out, "(conversation cleared)")
			continue
		case "/help", "/?":
			fmt.Fprintln(out, "Type a message and press Enter. /reset clears the conversation, /quit leaves.")
			continue
		}
		inReasoning := false
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if !opt.FirstDeadline.IsZero() {
			tctx, cancel = context.WithDeadlineCause(ctx, opt.FirstDeadline, errWallClock)
			opt.FirstDeadline = time.Time{}
		}
		res, err := b.Turn(tctx, Input{Text: line}, func(ev Event) error {
			switch ev.Kind {
			case EventText:
				if inReasoning {
					fmt.Fprint(out, "]\n")
					inReasoning = false
				}
				fmt.Fprint(out, ev.Text)
			case EventReasoning:
				if opt.ShowReasoning {
					if !inReasoning {
						fmt.Fprint(out, "[thinking: ")
						inReasoning = true
					}
					fmt.Fprint(out, ev.Text)
				}
			case EventToolCall:
				if opt.ShowTools {
					fmt.Fprintf(out, "[tool %s %s]\n", ev.Tool, ev.Text)
				}
			case EventToolResult:
				if opt.ShowTools {
					fmt.Fprintf(out, "[result %s]\n", ev.Text)
				}
			case EventAction:
				fmt.Fprintf(out, "\n[action %s", ev.Action.Kind)
				if ev.Action.Value != "" {
					fmt.Fprintf(out, " %s", ev.Action.Value)
				}
				if ev.Action.Amount != 0 {
					fmt.Fprintf(out, " %+.2f", ev.Action.Amount)
				}
				fmt.Fprint(out, "]")
			}
			return nil
		})
		cancel()
		if inReasoning {
			fmt.Fprint(out, "]")
		}
		fmt.Fprintln(out)
		if opt.OnTurn != nil {
			opt.OnTurn(line, res, err)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(errOut, "chat: %v\n", err)
		}
	}
}
