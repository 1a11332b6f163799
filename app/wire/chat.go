package wire

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/parley-voice/parley/app"
)

// Console prints an assistant's events as a transcript: what was heard (with its tags), the
// answer, and each turn's latency line. It returns when events closes.
func Console(w io.Writer, events <-chan app.Event, verbose bool) { console(w, events, verbose, nil) }

// console is Console calling done after each finished turn is printed.
func console(w io.Writer, events <-chan app.Event, verbose bool, done func(turn int64)) {
	for e := range events {
		switch e.Kind {
		case app.EvTranscript:
			if e.Transcript != nil && e.Transcript.Text != "" {
				fmt.Fprintf(w, "you: %s%s\n", e.Transcript.Text, tags(*e.Transcript))
			}
		case app.EvTurnDone:
			x := e.Exchange
			if x == nil {
				continue
			}
			if x.Answer != "" || x.Interrupted {
				mark := ""
				if x.Interrupted {
					mark = "  [interrupted]"
				}
				fmt.Fprintf(w, "parley: %s%s\n", x.Answer, mark)
			}
			if x.Stopped {
				fmt.Fprintln(w, "  (stopped)")
			}
			if l := x.Latency.String(); l != "" {
				fmt.Fprintf(w, "  latency: %s\n", l)
			}
			if done != nil {
				done(e.Turn)
			}
		case app.EvError:
			fmt.Fprintf(w, "  error: %s\n", e.Err)
		case app.EvBargeIn:
			if verbose {
				fmt.Fprintf(w, "  (barge-in: %s)\n", e.Text)
			}
		case app.EvEchoRejected:
			if verbose {
				fmt.Fprintln(w, "  (ignored my own voice)")
			}
		case app.EvState:
			if verbose {
				fmt.Fprintf(w, "  [%s]\n", e.State)
			}
		}
	}
}

func tags(t app.Transcript) string {
	var parts []string
	for _, s := range []string{t.Lang, t.Emotion, t.Event} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "  [" + strings.Join(parts, " · ") + "]"
}

// ChatVoice runs the assistant headless until ctx ends or in reaches EOF: it listens on the
// default devices (hands-free unless the configuration says otherwise), and each line typed on
// in is a text turn (answered before the next line is read). In push-to-talk mode an empty line starts and stops listening. It prints
// the transcript, the answer and the latency line of every turn to out.
func ChatVoice(ctx context.Context, a *Assistant, in io.Reader, out io.Writer, verbose bool) error {
	for _, n := range a.Notes {
		fmt.Fprintln(out, "note:", n)
	}
	ev, unsub := a.Subscribe(256)
	printed := make(chan struct{})
	finished := make(chan int64, 64) // turns printed
	go func() {
		defer close(printed)
		console(out, ev, verbose, func(id int64) {
			select {
			case finished <- id:
			default:
			}
		})
	}()
	defer func() { unsub(); <-printed }()
	switch a.Mode() {
	case app.PushToTalk:
		fmt.Fprintln(out, "push-to-talk: press Enter to talk, Enter again to stop; or type a message. Ctrl-D quits.")
	case app.HandsFree:
		fmt.Fprintln(out, "listening (hands-free); type a message to send it as text. Ctrl-D quits.")
	case app.WakeWord:
		fmt.Fprintln(out, "say the wake word; type a message to send it as text. Ctrl-D quits.")
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	listening := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case l, ok := <-lines:
			if !ok {
				return nil
			}
			l = strings.TrimSpace(l)
			switch {
			case l == "" && a.Mode() == app.PushToTalk:
				var err error
				if listening {
					err = a.StopListening()
				} else {
					err = a.StartListening()
				}
				if err != nil {
					fmt.Fprintln(out, "  error:", err)
					continue
				}
				listening = !listening
			case l != "":
				id, err := a.SubmitText(l)
				if err != nil {
					return err
				}
				// one typed turn at a time: a line typed (or piped) meanwhile waits its turn
				for done := false; !done; {
					select {
					case t := <-finished:
						done = t >= id
					case <-ctx.Done():
						return nil
					}
				}
			}
		}
	}
}
