package tune

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
)

// The trainer (train/trainer.py) prints one JSON object per line on stdout:
//
//	{"event": "start", "step": 0, "total_steps": 400, "world_size": 2, "device": "cpu", ...}
//	{"event": "train", "step": 10, "epoch": 0, "loss": 1.93, "lr": 0.0005, "eta_s": 340.2, ...}
//	{"event": "val", "step": 100, "epoch": 1, "loss": 1.2, "cer": 0.31, ...}
//	{"event": "checkpoint", "step": 100, "path": "…/ckpt-00000100.pt"}
//	{"event": "resume", "step": 100, "path": "…", "epoch": 1, "part": 0, "batch": 12}
//	{"event": "done", "step": 400, "epoch": 4, "elapsed_s": 812.3, "checkpoint": "…"}
//
// Other modules the jobs run (preparation, export) print one JSON object as their result.

// MaxLossPoints bounds the loss history kept for the live plot (see Progress.addLoss).
const MaxLossPoints = 256

// maxLine is the longest stdout line parsed; longer lines are skipped (and counted).
const maxLine = 64 << 10

// ErrBadEvent is wrapped by ParseEvent's errors.
var ErrBadEvent = errors.New("tune: bad trainer event")

// TrainerEvent is one parsed line of the trainer's output.
type TrainerEvent struct {
	Event string
	// Numbers are every numeric field of the line (step, loss, eta_s, cer…).
	Numbers map[string]float64
	// Strings are every string field (path, checkpoint, device…).
	Strings map[string]string
}

// Int returns a numeric field as an int (0 when absent).
func (e TrainerEvent) Int(key string) int {
	v, ok := e.Numbers[key]
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) || v > math.MaxInt32 || v < math.MinInt32 {
		return 0
	}
	return int(v)
}

// ParseEvent parses one line. A line that is not a JSON object with a string "event" is an
// error wrapping ErrBadEvent; numbers that are not finite are dropped.
func ParseEvent(line []byte) (TrainerEvent, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return TrainerEvent{}, fmt.Errorf("%w: not a JSON object", ErrBadEvent)
	}
	if len(line) > maxLine {
		return TrainerEvent{}, fmt.Errorf("%w: line of %d bytes", ErrBadEvent, len(line))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return TrainerEvent{}, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	ev := TrainerEvent{Numbers: map[string]float64{}, Strings: map[string]string{}}
	if err := json.Unmarshal(raw["event"], &ev.Event); err != nil || ev.Event == "" {
		return TrainerEvent{}, fmt.Errorf("%w: no \"event\" name", ErrBadEvent)
	}
	for k, v := range raw {
		if k == "event" || len(v) == 0 {
			continue
		}
		switch v[0] {
		case '"':
			var s string
			if json.Unmarshal(v, &s) == nil {
				ev.Strings[k] = s
			}
		case '{', '[', 'n', 't', 'f':
			// nested config, lists, null and booleans are not progress
		default:
			var f float64
			if json.Unmarshal(v, &f) == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				ev.Numbers[k] = f
			}
		}
	}
	return ev, nil
}

// LossPoint is one point of the loss plot.
type LossPoint struct {
	Step int     `json:"step"`        // the last step of the point's bucket
	Loss float64 `json:"loss"`        // mean training loss over the bucket
	N    int     `json:"n,omitempty"` // logged values averaged
}

// Progress is a job's state as the wizard shows it; it is also the job's progress document
// in the store.
type Progress struct {
	Stage      string   `json:"stage,omitempty"`       // the step running or last run ("prepare", "train", "export")
	StagesDone []string `json:"stages_done,omitempty"` // steps finished (skipped on resume)
	Step       int      `json:"step"`                  // optimizer steps done
	TotalSteps int      `json:"total_steps"`           // of the whole run (0 until known)
	Epoch      int      `json:"epoch"`
	Loss       float64  `json:"loss,omitempty"`  // last logged training loss
	ETA        float64  `json:"eta_s,omitempty"` // seconds left in the training step (0 = unknown)
	// Losses is the training loss history, at most MaxLossPoints points of LossStride steps.
	Losses     []LossPoint `json:"losses,omitempty"`
	LossStride int         `json:"loss_stride,omitempty"`
	// Val holds the last validation figures (loss, cer…).
	Val        map[string]float64 `json:"val,omitempty"`
	Checkpoint string             `json:"checkpoint,omitempty"` // newest checkpoint written
	WorldSize  int                `json:"world_size,omitempty"` // trainer processes
	Device     string             `json:"device,omitempty"`
	Resumed    int                `json:"resumed,omitempty"` // times the job was resumed
	// Results are the JSON results of preparation and export steps, by step name.
	Results map[string]json.RawMessage `json:"results,omitempty"`
	// BadLines counts trainer output lines that looked like events but did not parse.
	BadLines int `json:"bad_lines,omitempty"`
	// PID and PIDStart identify the job's process while it runs (its process group leader and
	// the kernel's start time of it), so another Parley can tell a live job from a dead one.
	PID      int    `json:"pid,omitempty"`
	PIDStart uint64 `json:"pid_start,omitempty"`
	// Interrupted is set when a job was found "running" with no process: Parley or the machine
	// stopped under it. It can be resumed.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Fraction is the share of the training done, 0..1 (0 while unknown).
func (p *Progress) Fraction() float64 {
	if p.TotalSteps <= 0 {
		return 0
	}
	return min(1, float64(p.Step)/float64(p.TotalSteps))
}

// addLoss adds a point to the history. Each point is the mean loss of a bucket of LossStride
// steps; when the history is full the stride doubles and neighbouring buckets merge, so the
// whole run stays visible at an even resolution. Points at or after step are first dropped:
// after a resume the trainer repeats the steps since its checkpoint.
func (p *Progress) addLoss(step int, loss float64) {
	p.truncateLosses(step)
	if p.LossStride < 1 {
		p.LossStride = 1
	}
	bucket := func(s int) int { return max(0, s-1) / p.LossStride }
	if n := len(p.Losses); n > 0 && bucket(p.Losses[n-1].Step) == bucket(step) {
		last := &p.Losses[n-1]
		w := float64(max(1, last.N))
		last.Loss = (last.Loss*w + loss) / (w + 1)
		last.Step, last.N = step, int(w)+1
	} else {
		p.Losses = append(p.Losses, LossPoint{Step: step, Loss: loss, N: 1})
	}
	for len(p.Losses) > MaxLossPoints {
		p.LossStride *= 2
		merged := p.Losses[:0]
		for _, lp := range p.Losses {
			if m := len(merged); m > 0 && bucket(merged[m-1].Step) == bucket(lp.Step) {
				last := &merged[m-1]
				a, b := float64(max(1, last.N)), float64(max(1, lp.N))
				last.Loss = (last.Loss*a + lp.Loss*b) / (a + b)
				last.Step, last.N = lp.Step, int(a+b)
				continue
			}
			merged = append(merged, lp)
		}
		p.Losses = merged
	}
}

func (p *Progress) truncateLosses(step int) {
	i := sort.Search(len(p.Losses), func(i int) bool { return p.Losses[i].Step >= step })
	p.Losses = p.Losses[:i]
}

// apply folds one trainer event into the progress.
func (p *Progress) apply(ev TrainerEvent) {
	n := ev.Numbers
	if _, ok := n["step"]; ok {
		p.Step = ev.Int("step")
	}
	if _, ok := n["total_steps"]; ok && ev.Int("total_steps") > 0 {
		p.TotalSteps = ev.Int("total_steps")
	}
	if _, ok := n["epoch"]; ok {
		p.Epoch = ev.Int("epoch")
	}
	switch ev.Event {
	case "start":
		if w := ev.Int("world_size"); w > 0 {
			p.WorldSize = w
		}
		if d := ev.Strings["device"]; d != "" {
			p.Device = d
		}
		p.truncateLosses(p.Step + 1)
	case "resume":
		p.truncateLosses(p.Step + 1)
	case "train":
		if l, ok := n["loss"]; ok {
			p.Loss = l
			p.addLoss(p.Step, l)
		}
		if eta, ok := n["eta_s"]; ok && eta >= 0 {
			p.ETA = eta
		}
	case "val":
		p.Val = map[string]float64{}
		for k, v := range n {
			if k != "step" && k != "epoch" {
				p.Val[k] = v
			}
		}
	case "checkpoint":
		if s := ev.Strings["path"]; s != "" {
			p.Checkpoint = s
		}
	case "done":
		p.ETA = 0
		if s := ev.Strings["checkpoint"]; s != "" {
			p.Checkpoint = s
		}
	}
}

// clone copies the progress so a snapshot can leave the runner's goroutine.
func (p *Progress) clone() Progress {
	c := *p
	c.StagesDone = append([]string(nil), p.StagesDone...)
	c.Losses = append([]LossPoint(nil), p.Losses...)
	if p.Val != nil {
		c.Val = make(map[string]float64, len(p.Val))
		for k, v := range p.Val {
			c.Val[k] = v
		}
	}
	if p.Results != nil {
		c.Results = make(map[string]json.RawMessage, len(p.Results))
		for k, v := range p.Results {
			c.Results[k] = v
		}
	}
	return c
}

// ParseProgress reads a job's progress document ({} and empty give a zero Progress).
func ParseProgress(b []byte) (Progress, error) {
	var p Progress
	if len(bytes.TrimSpace(b)) == 0 {
		return p, nil
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return Progress{}, fmt.Errorf("tune: job progress: %w", err)
	}
	return p, nil
}
