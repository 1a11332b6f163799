package tune

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/edit"
	"github.com/parley-voice/parley/lang"
	"github.com/parley-voice/parley/voices/clone"
)

// "Improve recognition of my voice": the recogniser fine-tuned on the dataset's clips. The
// clips are split once into training and held-out clips (the held-out ones are never trained
// on); the job prepares a PyTorch starting point from the installed recogniser, fine-tunes it
// and exports it; the character error rate on the held-out clips before and after decides
// whether the result is installed as a local model.

// ASRKind is the job kind of a recogniser fine-tune.
const ASRKind = "asr-finetune"

var (
	// ErrTooFewClips: not enough usable clips to train on and hold some out.
	ErrTooFewClips = errors.New("tune: not enough usable clips")
	// ErrNotBetter: the fine-tuned recogniser is not better on the held-out clips.
	ErrNotBetter = errors.New("tune: the fine-tuned recogniser is not better on your held-out clips")
)

// MinASRClips is the fewest usable clips a recogniser fine-tune accepts.
const MinASRClips = 8

// ASRConfig chooses the starting point and the training.
type ASRConfig struct {
	// Base is the installed recogniser's directory (a Parley export: model.onnx + tokens.txt)
	// and BaseID its model id; Official, when set, is FunASR's SenseVoiceSmall directory
	// (model.pt, am.mvn, *.bpe.model) to start from instead of recovering the ONNX weights.
	Base, BaseID, Official string
	// HeldOut is the share of clips held out for the before/after score (default 0.2).
	HeldOut float64
	// Epochs and LR (defaults: enough epochs for about 300 optimizer steps, clamped to
	// 10..60; 3e-4).
	Epochs int
	LR     float64
	// Procs and Threads override the runner's plan.
	Procs, Threads int
	// Seed fixes the run (default 1).
	Seed int
}

// ASRMeta is what a recogniser fine-tune job remembers (its Spec.Meta).
type ASRMeta struct {
	Dataset  string   `json:"dataset"` // the dataset's directory
	Name     string   `json:"name"`    // the dataset's name
	Base     string   `json:"base"`
	BaseID   string   `json:"base_id"`
	Official string   `json:"official,omitempty"`
	Train    []string `json:"train"`    // clip ids trained on
	HeldOut  []string `json:"held_out"` // clip ids scored, never trained on
	// Skipped are clips left out of training, with the reason.
	Skipped map[string]string `json:"skipped,omitempty"`
}

// ASRMetaOf reads a recogniser job's record.
func ASRMetaOf(j Job) (ASRMeta, error) {
	var m ASRMeta
	if j.Spec.Kind != ASRKind {
		return m, fmt.Errorf("%w: job %d is a %s job", ErrBadSpec, j.ID, j.Spec.Kind)
	}
	if err := json.Unmarshal(j.Spec.Meta, &m); err != nil {
		return m, fmt.Errorf("%w: job %d: %v", ErrBadSpec, j.ID, err)
	}
	return m, nil
}

// SplitClips splits the usable clips into training and held-out ones. A clip's side depends
// only on its id (a hash), so adding recordings later does not move old clips across; at
// least one clip is held out and at least MinASRClips-2 are trained on.
func SplitClips(d *clone.Dataset, frac float64) (train, held []clone.Clip, err error) {
	if frac <= 0 || frac >= 1 {
		frac = 0.2
	}
	var usable []clone.Clip
	for _, c := range d.Clips {
		if c.Usable() {
			usable = append(usable, c)
		}
	}
	if len(usable) < MinASRClips {
		return nil, nil, fmt.Errorf("%w: %d usable clips, at least %d are needed (import, slice and label more recordings)", ErrTooFewClips, len(usable), MinASRClips)
	}
	// held out: the clips whose id hashes under frac (a clip keeps its side as recordings are
	// added), topped up with the next lowest hashes while fewer than frac of the clips
	sort.SliceStable(usable, func(i, j int) bool { return clipHash(usable[i].ID) < clipHash(usable[j].ID) })
	want := max(1, int(math.Round(frac*float64(len(usable)))))
	for i, c := range usable {
		if clipHash(c.ID) < frac || i < want {
			held = append(held, c)
		} else {
			train = append(train, c)
		}
	}
	if len(train) < MinASRClips-2 {
		n := len(usable) - (MinASRClips - 2)
		held, train = usable[:n], usable[n:]
	}
	return train, held, nil
}

// clipHash places a clip id in [0, 1).
func clipHash(id string) float64 {
	f := fnv.New64a()
	f.Write([]byte(id))
	return float64(f.Sum64()>>11) / (1 << 53)
}

// vocabChars reads the characters a recogniser can write from its tokens.txt (nil when the
// file cannot be read: then nothing is filtered).
func vocabChars(dir string) map[rune]bool {
	f, err := os.Open(filepath.Join(dir, "tokens.txt"))
	if err != nil {
		return nil
	}
	defer f.Close()
	chars := map[rune]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		piece, _, _ := strings.Cut(sc.Text(), " ")
		if strings.HasPrefix(piece, "<") && strings.HasSuffix(piece, ">") {
			continue
		}
		for _, r := range strings.ReplaceAll(piece, "▁", "") {
			chars[r] = true
		}
	}
	return chars
}

// unwritable lists the characters of a transcript the recogniser cannot write.
func unwritable(text string, chars map[rune]bool) string {
	if chars == nil {
		return ""
	}
	cased := false
	for r := range chars {
		if unicode.IsUpper(r) {
			cased = true
			break
		}
	}
	var bad []rune
	seen := map[rune]bool{}
	for _, r := range NormalizeText(text) {
		if r == ' ' {
			continue
		}
		if !cased {
			r = unicode.ToLower(r)
		}
		if !chars[r] && !seen[r] {
			seen[r] = true
			bad = append(bad, r)
		}
	}
	return string(bad)
}

// NewASRJob creates the fine-tune job for a dataset: it splits the clips, writes the training
// manifest into the job's directory and records the split.
func NewASRJob(ctx context.Context, r *Runner, d *clone.Dataset, cfg ASRConfig) (Job, error) {
	if cfg.Base == "" && cfg.Official == "" {
		return Job{}, fmt.Errorf("%w: no starting point (an installed recogniser or FunASR's model.pt)", ErrBadSpec)
	}
	train, held, err := SplitClips(d, cfg.HeldOut)
	if err != nil {
		return Job{}, err
	}
	chars := vocabChars(cfg.Base)
	if cfg.Official != "" {
		chars = nil
	}
	meta := ASRMeta{Dataset: d.Dir(), Name: d.Name, Base: cfg.Base, BaseID: cfg.BaseID, Official: cfg.Official, Skipped: map[string]string{}}
	type rec struct {
		Key       string `json:"key"`
		Source    string `json:"source"`
		SourceLen int    `json:"source_len"`
		Target    string `json:"target"`
		TargetLen int    `json:"target_len"`
		Lang      string `json:"text_language"`
		Emo       string `json:"emo_target"`
		Event     string `json:"event_target"`
		ITN       string `json:"with_or_wo_itn"`
	}
	var lines []rec
	var seconds float64
	for _, c := range train {
		l := c.Lang
		if !lang.Known(l) {
			l = d.Lang
		}
		if !lang.Known(l) {
			meta.Skipped[c.ID] = fmt.Sprintf("language %q has no SenseVoice tag", c.Lang)
			continue
		}
		if bad := unwritable(c.Text, chars); bad != "" {
			meta.Skipped[c.ID] = fmt.Sprintf("the transcript has characters the recogniser cannot write (%s): another language, or symbols to spell out", bad)
			continue
		}
		meta.Train = append(meta.Train, c.ID)
		seconds += c.Seconds
		lines = append(lines, rec{Key: c.ID, Source: d.Abs(c.Path), SourceLen: int(math.Round(c.Seconds * 100)), Target: c.Text,
			TargetLen: len(strings.Fields(c.Text)), Lang: "<|" + l + "|>", Emo: "<|NEUTRAL|>", Event: "<|Speech|>", ITN: "<|woitn|>"})
	}
	for _, c := range held {
		meta.HeldOut = append(meta.HeldOut, c.ID)
	}
	if len(meta.Train) < MinASRClips-2 {
		return Job{}, fmt.Errorf("%w: %d clips can be trained on after %d were left out (%s)", ErrTooFewClips, len(meta.Train), len(meta.Skipped), firstReasons(meta.Skipped))
	}
	if len(meta.Skipped) == 0 {
		meta.Skipped = nil
	}
	epochs := cfg.Epochs
	if epochs <= 0 {
		// ~300 optimizer steps at ~8 clips a batch, within 10..60 epochs
		batches := max(1, (len(meta.Train)+7)/8)
		epochs = min(60, max(10, 300/batches))
	}
	lr := cfg.LR
	if lr <= 0 {
		lr = 3e-4
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = 1
	}
	prepare := Step{Name: "prepare", Module: "train.sensevoice.base", Args: []string{"--out", "{job}/init"}}
	if cfg.Official != "" {
		prepare.Args = append(prepare.Args, "--official", cfg.Official)
	} else {
		prepare.Args = append(prepare.Args, "--onnx", cfg.Base)
	}
	mb, _ := json.Marshal(meta)
	spec := Spec{
		Kind: ASRKind, Title: "Improve recognition: " + d.Name, Root: filepath.Join(d.Dir(), "jobs"),
		Procs: cfg.Procs, Threads: cfg.Threads, Samples: len(meta.Train), Meta: mb,
		Steps: []Step{
			prepare,
			{Name: "train", Module: "train.sensevoice.train", Train: true, Args: []string{
				"--train", "{job}/train.jsonl", "--init", "{job}/init/init.pt", "--from-init", "--out", "{job}/run",
				"--epochs", strconv.Itoa(epochs), "--lr", strconv.FormatFloat(lr, 'g', -1, 64), "--warmup", "20",
				"--scheduler", "cosine", "--weight-decay", "0.01", "--clip", "5", "--batch-size", "6000",
				"--batch-size-sample-max", "8", "--log-interval", "5", "--save-interval", "25", "--keep-checkpoints", "2",
				"--seed", strconv.Itoa(seed)}},
			{Name: "export", Module: "train.sensevoice.export", Args: []string{"--checkpoint", "{job}/run", "--out", "{job}/model"}},
		},
	}
	j, err := r.Create(ctx, spec)
	if err != nil {
		return Job{}, err
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, l := range lines {
		enc.Encode(l)
	}
	if err := writeFileAtomic(filepath.Join(j.Spec.Dir, "train.jsonl"), []byte(b.String())); err != nil {
		r.st.SetJobStatus(context.WithoutCancel(ctx), j.ID, "failed", err.Error())
		return Job{}, err
	}
	return j, nil
}

func firstReasons(m map[string]string) string {
	var ids []string
	for k := range m {
		ids = append(ids, k)
	}
	sort.Strings(ids)
	var parts []string
	for _, id := range ids[:min(3, len(ids))] {
		parts = append(parts, id+": "+m[id])
	}
	return strings.Join(parts, "; ")
}

func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("tune: writing %s: %w", path, err)
	}
	return nil
}

// NormalizeText is the text form both sides of a score are compared in: lower case, letters
// and digits, every other character a word break, single spaces.
func NormalizeText(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' {
			return unicode.ToLower(r)
		}
		return ' '
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// CharErrors is the character edit distance between normalised reference and hypothesis,
// and the reference's length: the parts of a character error rate.
func CharErrors(ref, hyp string) (errs, n int) {
	a, b := []rune(NormalizeText(ref)), []rune(NormalizeText(hyp))
	return edit.Distance(a, b), len(a)
}

// ClipScore is one held-out clip's transcript and errors.
type ClipScore struct {
	Clip   string `json:"clip"`
	Ref    string `json:"ref"`
	Hyp    string `json:"hyp"`
	Errors int    `json:"errors"`
	Chars  int    `json:"chars"`
}

// Score is a recogniser's character error rate on a set of clips.
type Score struct {
	CER    float64     `json:"cer"`
	Errors int         `json:"errors"`
	Chars  int         `json:"chars"`
	Clips  []ClipScore `json:"clips"`
}

// ScoreClips transcribes clips of the dataset with tr and scores them against their texts.
func ScoreClips(ctx context.Context, d *clone.Dataset, ids []string, tr clone.Transcriber) (Score, error) {
	var s Score
	for _, id := range ids {
		c, err := d.Clip(id)
		if err != nil {
			continue // dropped from the dataset since the split
		}
		pcm, err := d.ReadClip(c.Path)
		if err != nil {
			return s, fmt.Errorf("clip %s: %w", id, err)
		}
		h, err := tr.Transcribe(ctx, pcm)
		if err != nil {
			return s, fmt.Errorf("clip %s: %w", id, err)
		}
		e, n := CharErrors(c.Text, h.Text)
		s.Clips = append(s.Clips, ClipScore{Clip: id, Ref: c.Text, Hyp: h.Text, Errors: e, Chars: n})
		s.Errors += e
		s.Chars += n
	}
	if s.Chars == 0 {
		return s, fmt.Errorf("%w: none of the held-out clips is left in the dataset", ErrTooFewClips)
	}
	s.CER = float64(s.Errors) / float64(s.Chars)
	return s, nil
}

// ASRResult is the outcome of a recogniser fine-tune, kept in the job's progress (Results
// "evaluate").
type ASRResult struct {
	Before    Score  `json:"before"`
	After     Score  `json:"after"`
	Improved  bool   `json:"improved"`
	Installed string `json:"installed,omitempty"` // the local model id
	Message   string `json:"message"`
}

// ModelDir is where a finished recogniser job left its exported model.
func ModelDir(j Job) string { return filepath.Join(j.Spec.Dir, "model") }

// Evaluate scores the base and the fine-tuned recogniser on the job's held-out clips; open
// makes a transcriber from a model directory (the caller's recogniser, so this package needs
// no ONNX Runtime of its own).
func Evaluate(ctx context.Context, j Job, open func(dir string) (clone.Transcriber, func(), error)) (ASRResult, error) {
	m, err := ASRMetaOf(j)
	if err != nil {
		return ASRResult{}, err
	}
	if j.Status != "done" {
		return ASRResult{}, fmt.Errorf("tune: job %d is %s, not done", j.ID, j.Status)
	}
	d, err := clone.Open(m.Dataset)
	if err != nil {
		return ASRResult{}, err
	}
	words, err := trainWords(j)
	if err != nil {
		return ASRResult{}, err
	}
	if err := carryLM(m.Base, ModelDir(j), words); err != nil {
		return ASRResult{}, err
	}
	var res ASRResult
	for _, side := range []struct {
		dir string
		out *Score
	}{{m.Base, &res.Before}, {ModelDir(j), &res.After}} {
		if side.dir == "" {
			continue // started from model.pt alone: no installed base to compare with
		}
		tr, closeFn, err := open(side.dir)
		if err != nil {
			return res, err
		}
		*side.out, err = ScoreClips(ctx, d, m.HeldOut, tr)
		closeFn()
		if err != nil {
			return res, err
		}
	}
	res.Improved = m.Base == "" || res.After.Errors < res.Before.Errors
	return res, nil
}

// carryLM copies the base recogniser's token language model (lm.bin, with lm.json, the beam
// weights tuned for it, and lm.words.txt, the word list those weights may charge against) into
// the fine-tune's export when the two share one vocabulary (tokens.txt byte for byte): a
// fine-tune keeps its base's pieces, so the base's LM fits it, and without it the fine-tune
// would decode greedily, scored and used worse than its base for that alone. The word list
// gains the words the fine-tune learnt (trainWords: a person's names and jargon), which it
// would otherwise charge. No LM beside the base, or another vocabulary: nothing to do.
func carryLM(base, dst string, words []string) error {
	if base == "" {
		return nil
	}
	lm, err := os.ReadFile(filepath.Join(base, asr.LMFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("tune: the base recogniser's language model: %w", err)
	}
	same := false
	if lm != nil {
		bt, err := os.ReadFile(filepath.Join(base, "tokens.txt"))
		if err != nil {
			return fmt.Errorf("tune: the base recogniser's vocabulary: %w", err)
		}
		dt, err := os.ReadFile(filepath.Join(dst, "tokens.txt"))
		if err != nil {
			return fmt.Errorf("tune: the fine-tune's vocabulary: %w", err)
		}
		same = bytes.Equal(bt, dt)
	}
	for _, f := range lmFiles {
		var b []byte
		switch {
		case same && f == asr.LMFile:
			b = lm // read above
		case same:
			if b, err = os.ReadFile(filepath.Join(base, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("tune: the base recogniser's %s: %w", f, err)
			}
		}
		if b == nil { // no LM to carry, its pieces are not the model's, or the base lacks this one: none, not a stale one
			if err := os.Remove(filepath.Join(dst, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("tune: %w", err)
			}
			continue
		}
		if f == lmWordsFile {
			b = withWords(b, words)
		}
		if err := writeIfChanged(filepath.Join(dst, f), b); err != nil {
			return fmt.Errorf("tune: copying the base's %s: %w", f, err)
		}
	}
	return nil
}

// trainWords are the words a fine-tune learnt: those of the transcripts in its own manifest
// (train.jsonl, the training clips alone, as they were when it trained), as the recogniser
// writes them (NormalizeText), each once, sorted.
func trainWords(j Job) ([]string, error) {
	path := filepath.Join(j.Spec.Dir, "train.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tune: job %d: its training manifest: %w", j.ID, err)
	}
	seen := map[string]bool{}
	for n, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var rec struct {
			Target string `json:"target"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return nil, fmt.Errorf("tune: job %d: %s line %d: %v", j.ID, path, n+1, err)
		}
		for _, w := range strings.Fields(NormalizeText(rec.Target)) {
			seen[w] = true
		}
	}
	words := make([]string, 0, len(seen))
	for w := range seen {
		words = append(words, w)
	}
	sort.Strings(words)
	return words, nil
}

// withWords is the word list list with the words it lacks appended, one a line.
func withWords(list []byte, words []string) []byte {
	if len(words) == 0 {
		return list
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(list), "\n") {
		have[strings.ToLower(strings.TrimSpace(l))] = true
	}
	out := slices.Clip(list)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	for _, w := range words {
		if !have[w] {
			out = append(append(out, w...), '\n')
		}
	}
	return out
}

// lmFiles are a recogniser's language model and the files that travel with it: its beam
// weights (asr.LMWeightsPath) and word list (asr.LexiconPath).
var lmFiles = []string{asr.LMFile, asr.LMWeightsPath(asr.LMFile), lmWordsFile}

// lmWordsFile is the word list beside the language model (lm.words.txt).
var lmWordsFile = asr.LexiconPath(asr.LMFile)

// writeIfChanged writes b to path unless path already holds exactly b: Evaluate and Install
// both carry the LM, and the second need not rewrite megabytes it already wrote.
func writeIfChanged(path string, b []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return nil
	}
	return writeFileAtomic(path, b)
}

// LocalID is the model id a dataset's fine-tuned recogniser is installed as.
func LocalID(datasetName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(datasetName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '-', r == '_', r == '.', r == ' ':
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-.")
	if s == "" {
		f := fnv.New32a()
		f.Write([]byte(datasetName))
		s = fmt.Sprintf("%08x", f.Sum32())
	}
	return "sensevoice-" + s
}

// Install adds the fine-tuned recogniser to the models as a local model (id LocalID), with
// the hashes of its files, replacing an earlier fine-tune of the same name. A failure leaves
// the earlier one installed: it is copied aside first and put back.
func Install(ctx context.Context, mgr *assets.Manager, j Job, res ASRResult) (string, error) {
	m, err := ASRMetaOf(j)
	if err != nil {
		return "", err
	}
	src := ModelDir(j)
	has := func(f string) bool { _, err := os.Stat(filepath.Join(src, f)); return err == nil }
	if !has("tokens.txt") || !has("model.onnx") && !has("model.int8.onnx") {
		return "", fmt.Errorf("tune: job %d: the exported model in %s is incomplete (tokens.txt and model.onnx or model.int8.onnx)", j.ID, src)
	}
	words, err := trainWords(j)
	if err != nil {
		return "", err
	}
	if err := carryLM(m.Base, src, words); err != nil {
		return "", err
	}
	var files []string
	for _, f := range append([]string{"model.onnx", "model.int8.onnx", "tokens.txt"}, lmFiles...) {
		if has(f) {
			files = append(files, f)
		}
	}
	id := LocalID(m.Name)
	base := m.BaseID
	if base == "" {
		base = "FunASR SenseVoiceSmall"
	}
	desc := fmt.Sprintf("SenseVoice fine-tuned on %s's voice from %s (held-out CER %.1f%% → %.1f%%)", m.Name, base, 100*res.Before.CER, 100*res.After.CER)
	lm := assets.LocalModel{ID: id, Kind: assets.KindASR, Description: desc, Files: files}

	in, err := installLocal(ctx, mgr, src, lm, true, j.Spec.Dir)
	if errors.Is(err, errRegistryModel) {
		return "", fmt.Errorf("tune: %s is a model of the registry, not a fine-tune; rename the dataset", id)
	}
	if err != nil {
		return "", fmt.Errorf("tune: installing %s: %w", id, err)
	}
	in.Keep()
	return in.Dir, nil
}

// errRegistryModel: a fine-tune would take the id of one of Parley's own models.
var errRegistryModel = errors.New("it is one of Parley's own models, not a fine-tune")

// localInstall is a fine-tune just installed by installLocal. The earlier fine-tune it
// replaced stays copied aside until Keep, so that a caller whose next step fails (saving the
// voice that names the model) can Undo: the new model out, the earlier one back.
type localInstall struct {
	Dir    string // the installed model's directory
	mgrDir string
	id     string
	backup string            // the replaced fine-tune's copy, "" when none
	old    assets.LocalModel // its entry
}

// Keep drops the copy of the replaced fine-tune.
func (in *localInstall) Keep() {
	if in.backup != "" {
		os.RemoveAll(in.backup)
	}
}

// Undo removes the new install and puts the replaced fine-tune back.
func (in *localInstall) Undo(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	fresh, err := assets.NewManager(nil, assets.Options{Dir: in.mgrDir})
	if err != nil {
		return err
	}
	if err := fresh.Remove(ctx, in.id); err != nil {
		return err
	}
	if in.backup == "" {
		return nil
	}
	if fresh, err = assets.NewManager(nil, assets.Options{Dir: in.mgrDir}); err != nil {
		return err
	}
	if _, err := fresh.InstallLocal(ctx, in.backup, in.old); err != nil {
		return fmt.Errorf("putting the earlier %s back: %w (a copy is in %s)", in.id, err, in.backup)
	}
	os.RemoveAll(in.backup)
	return nil
}

// installLocal installs src as the local model lm. An earlier fine-tune of that id is
// replaced when replace is set, else refused (assets.ErrExists); it is copied aside into
// keepDir first, put back if the new one cannot be installed, and kept there until the
// caller's Keep or Undo. A registry model of that id is never replaced (errRegistryModel).
func installLocal(ctx context.Context, mgr *assets.Manager, src string, lm assets.LocalModel, replace bool, keepDir string) (*localInstall, error) {
	id := lm.ID
	// a fresh view of the models: mgr's registry is fixed when it was made, so it may miss an
	// earlier install, and it keeps a removed entry
	fresh, err := assets.NewManager(nil, assets.Options{Dir: mgr.Dir()})
	if err != nil {
		return nil, err
	}
	in := &localInstall{mgrDir: mgr.Dir(), id: id}
	if old, err := fresh.Registry().Lookup(id); err == nil {
		if old.Origin != "local" {
			return nil, fmt.Errorf("%w: %s: %w", assets.ErrExists, id, errRegistryModel)
		}
		if !replace {
			return nil, fmt.Errorf("%w: %s (choose another name, or replace it)", assets.ErrExists, id)
		}
		in.old = assets.LocalModel{ID: id, Kind: old.Kind, Description: old.Description}
		for _, f := range old.Files {
			in.old.Files = append(in.old.Files, f.Path)
		}
		oldDir, err := fresh.ModelDir(id)
		if err != nil {
			return nil, err
		}
		in.backup = filepath.Join(keepDir, "replaced-"+id)
		os.RemoveAll(in.backup)
		if err := copyDir(oldDir, in.backup); err != nil {
			os.RemoveAll(in.backup)
			return nil, fmt.Errorf("keeping a copy of the installed %s: %w", id, err)
		}
		if err := fresh.Remove(ctx, id); err != nil {
			return nil, err
		}
		if fresh, err = assets.NewManager(nil, assets.Options{Dir: mgr.Dir()}); err != nil { // without the removed entry
			return nil, err
		}
	}
	dir, err := fresh.InstallLocal(ctx, src, lm)
	if err != nil {
		if in.backup != "" {
			if _, rerr := fresh.InstallLocal(context.WithoutCancel(ctx), in.backup, in.old); rerr != nil {
				return nil, fmt.Errorf("%w (and the earlier version could not be put back: %v; a copy is in %s)", err, rerr, in.backup)
			}
			os.RemoveAll(in.backup)
			return nil, fmt.Errorf("%w (the earlier version is still installed)", err)
		}
		return nil, err
	}
	in.Dir = dir
	return in, nil
}

func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, in); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
}
