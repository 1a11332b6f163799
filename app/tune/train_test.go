package tune

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/store"
)

// realRunner runs the repository's own trainer.
func realRunner(t *testing.T, st *store.Store) *Runner {
	t.Helper()
	tr := requireTorch(t)
	dir, _ := filepath.Abs(filepath.Join("..", "..", "train"))
	r := NewRunner(st, Options{Env: Env{Python: DefaultPython, TrainDir: dir}, Grace: 5 * time.Second, SaveEvery: time.Millisecond})
	r.torch = &tr
	return r
}

// tinySpec trains the tiny SenseVoice for `epochs` on testdata/speech (6 clips, 3 steps an
// epoch), logging every step and checkpointing every 2.
func tinySpec(t *testing.T, root string, epochs string) Spec {
	t.Helper()
	cmvn := filepath.Join(root, "cmvn.json")
	neg, inv := make([]float64, 560), make([]float64, 560)
	for i := range inv {
		inv[i] = 0.1
	}
	b, _ := json.Marshal(map[string]any{"neg_mean": neg, "inv_stddev": inv})
	if err := os.WriteFile(cmvn, b, 0o600); err != nil {
		t.Fatal(err)
	}
	manifest, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "speech", "manifest.jsonl"))
	return Spec{Kind: "asr-tiny", Root: root, Procs: 1, Threads: 1, Steps: []Step{{
		Name: "train", Module: "train.sensevoice.train", Train: true,
		Args: []string{"--train", manifest, "--cmvn", cmvn, "--size", "tiny", "--out", "{job}/run", "--epochs", epochs,
			"--batch-size", "600", "--log-interval", "1", "--save-interval", "2", "--seed", "3"},
	}}}
}

func lossByStep(evs []Event) map[int]float64 {
	m := map[int]float64{}
	for _, e := range evs {
		m[e.Progress.Step] = e.Progress.Loss
	}
	return m
}

// TestTinyTrainingKilledResumesExactly kills the real trainer (SIGKILL, as the OOM killer or a
// power cut would) right after a checkpoint in the middle of an epoch; Recover finds the job
// interrupted and a resume continues from that checkpoint with exactly the losses of an
// uninterrupted run.
func TestTinyTrainingKilledResumesExactly(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	st := openStore(t)
	r := realRunner(t, st)
	ctx := context.Background()

	var whole recorder
	j1 := create(t, r, tinySpec(t, t.TempDir(), "6"))
	if got, err := r.Run(ctx, j1.ID, whole.on); err != nil || got.Status != store.JobDone {
		t.Fatalf("uninterrupted run: %v %s", err, got.Status)
	}
	want := lossByStep(whole.kinds("train"))
	if len(want) != 18 {
		t.Fatalf("uninterrupted run logged %d steps, want 18", len(want))
	}

	// the trainer waits after step 8's checkpoint (a failpoint), so the kill lands there
	// however far a loaded machine lets it run ahead of this process reading its events
	spec := tinySpec(t, t.TempDir(), "6")
	spec.Env = map[string]string{"PARLEY_TRAIN_HOLD_AT_STEP": "8"}
	j2 := create(t, r, spec)
	var first recorder
	killed := 0
	_, err := r.Run(ctx, j2.ID, func(ev Event) {
		first.on(ev)
		// step 8 is the middle of epoch 2 (3 steps an epoch)
		if ev.Kind == "checkpoint" && ev.Progress.Step == 8 && killed == 0 {
			killed = ev.Progress.PID
			syscall.Kill(killed, syscall.SIGKILL)
		}
	})
	if err == nil || killed == 0 {
		t.Fatalf("the killed run should fail: %v (killed %d)", err, killed)
	}
	j, _ := r.Job(ctx, j2.ID)
	if j.Status != store.JobFailed || !j.Resumable() || j.Progress.Step < 8 || j.Progress.Step >= 18 {
		t.Fatalf("after the kill: %s at step %d", j.Status, j.Progress.Step)
	}
	for s, l := range lossByStep(first.kinds("train")) {
		if want[s] != l {
			t.Fatalf("step %d before the kill: loss %v, uninterrupted %v", s, l, want[s])
		}
	}

	var second recorder
	got, err := r.Run(ctx, j2.ID, second.on)
	if err != nil || got.Status != store.JobDone {
		t.Fatalf("resume: %v %s %s", err, got.Status, got.Error)
	}
	res := second.kinds("resume")
	if len(res) != 1 || res[0].Progress.Step != 8 {
		t.Fatalf("resume events %+v", res)
	}
	after := lossByStep(second.kinds("train"))
	if len(after) != 10 {
		t.Fatalf("resumed run logged %d steps, want 10 (9..18)", len(after))
	}
	for s, l := range after {
		if want[s] != l {
			t.Errorf("step %d after resume: loss %v, uninterrupted %v", s, l, want[s])
		}
	}
	if got.Progress.Step != 18 || len(got.Progress.Losses) != 18 {
		t.Errorf("final progress: step %d, %d loss points", got.Progress.Step, len(got.Progress.Losses))
	}
}

// TestTinyTrainingDDP runs the real trainer on two gloo processes through train.launch.
func TestTinyTrainingDDP(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	st := openStore(t)
	r := realRunner(t, st)
	spec := tinySpec(t, t.TempDir(), "2")
	spec.Procs = 2
	j := create(t, r, spec)
	var rec recorder
	got, err := r.Run(context.Background(), j.ID, rec.on)
	if err != nil || got.Status != store.JobDone {
		t.Fatalf("DDP run: %v %s %s", err, got.Status, got.Error)
	}
	if got.Progress.WorldSize != 2 || got.Progress.Step == 0 || got.Progress.Step != got.Progress.TotalSteps {
		t.Fatalf("progress %+v", got.Progress)
	}
}
