package tune

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/voices"
	"github.com/parley-voice/parley/voices/clone"
)

// The voice fine-tune ("Train" for voices): the installed ChatTTS voice model is recovered as
// PyTorch (train.chattts.from_onnx), a speaker vector (and, asked for, the GPT) is trained on
// the dataset's training clips (train.chattts.finetune), and the result is exported. Installing
// it adds a voice to the library: an embedding voice for the installed model, or, when the GPT
// was trained, a local model plus that voice.

// TTSKind is the job kind of a voice fine-tune.
const TTSKind = "tts-finetune"

// TTSConfig chooses the base voice model and the training.
type TTSConfig struct {
	Model  string // the ChatTTS export directory to start from
	GPT    bool   // train the GPT, embeddings and decoder too (a new model), not only a speaker vector
	Epochs int    // default 30 (speaker only) or 15 (GPT)
	LR     float64
	// SpeakerInit is the starting speaker vector (e.g. the closest seed speaker); nil = the
	// model's mean speaker. StartSeed and StartSimilarity, recorded with the job, say which
	// seed speaker it is and how close the speaker encoder found it to the person.
	SpeakerInit     []float32
	StartSeed       int64
	StartSimilarity float64
	Procs, Threads  int
	Seed            int
}

// TTSMeta is what a voice fine-tune job remembers.
type TTSMeta struct {
	Dataset string   `json:"dataset"`
	Name    string   `json:"name"`
	Model   string   `json:"model"`
	GPT     bool     `json:"gpt"`
	Train   []string `json:"train"`
	HeldOut []string `json:"held_out"`
	// StartSeed is the seed speaker the training started from (0: the model's mean speaker),
	// StartSimilarity how close the speaker encoder found it to the person.
	StartSeed       int64   `json:"start_seed,omitempty"`
	StartSimilarity float64 `json:"start_similarity,omitempty"`
}

// TTSMetaOf reads a voice job's record.
func TTSMetaOf(j Job) (TTSMeta, error) {
	var m TTSMeta
	if j.Spec.Kind != TTSKind {
		return m, fmt.Errorf("%w: job %d is a %s job", ErrBadSpec, j.ID, j.Spec.Kind)
	}
	if err := json.Unmarshal(j.Spec.Meta, &m); err != nil {
		return m, fmt.Errorf("%w: job %d: %v", ErrBadSpec, j.ID, err)
	}
	return m, nil
}

// NewTTSJob creates a voice fine-tune job: the training clips (the same held-out split as the
// recogniser's: never trained on, kept for Evaluate) go into clips.jsonl in the job directory.
func NewTTSJob(ctx context.Context, r *Runner, d *clone.Dataset, cfg TTSConfig) (Job, error) {
	if cfg.Model == "" {
		return Job{}, fmt.Errorf("%w: no voice model to start from", ErrBadSpec)
	}
	train, held, err := SplitClips(d, 0.2)
	if err != nil {
		return Job{}, err
	}
	meta := TTSMeta{Dataset: d.Dir(), Name: d.Name, Model: cfg.Model, GPT: cfg.GPT}
	if cfg.SpeakerInit != nil {
		meta.StartSeed, meta.StartSimilarity = cfg.StartSeed, cfg.StartSimilarity
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, c := range train {
		meta.Train = append(meta.Train, c.ID)
		enc.Encode(map[string]string{"key": c.ID, "audio": d.Abs(c.Path), "text": c.Text})
	}
	for _, c := range held {
		meta.HeldOut = append(meta.HeldOut, c.ID)
	}
	epochs, lr := cfg.Epochs, cfg.LR
	if epochs <= 0 {
		epochs = 30
		if cfg.GPT {
			epochs = 15
		}
	}
	if lr <= 0 {
		lr = 3e-3
		if cfg.GPT {
			lr = 2e-4
		}
	}
	seed := max(cfg.Seed, 1)
	trainArgs := []string{"train", "--init", "{job}/init/init.pt", "--clips", "{job}/clips.jsonl", "--out", "{job}/run",
		"--epochs", strconv.Itoa(epochs), "--lr", strconv.FormatFloat(lr, 'g', -1, 64), "--warmup", "10", "--scheduler", "cosine",
		"--clip", "5", "--batch-size", "3000", "--batch-size-sample-max", "8", "--log-interval", "5", "--save-interval", "25",
		"--keep-checkpoints", "2", "--seed", strconv.Itoa(seed)}
	if cfg.GPT {
		trainArgs = append(trainArgs, "--gpt")
	}
	if cfg.SpeakerInit != nil {
		trainArgs = append(trainArgs, "--speaker-init", "{job}/speaker-init.bin")
	}
	mb, _ := json.Marshal(meta)
	spec := Spec{
		Kind: TTSKind, Title: "Train a voice: " + d.Name, Root: filepath.Join(d.Dir(), "jobs"),
		Procs: cfg.Procs, Threads: cfg.Threads, Samples: len(meta.Train), Meta: mb,
		Steps: []Step{
			{Name: "prepare", Module: "train.chattts.from_onnx", Args: []string{"--model", cfg.Model, "--out", "{job}/init"}},
			{Name: "train", Module: "train.chattts.finetune", Train: true, Args: trainArgs},
			{Name: "export", Module: "train.chattts.finetune", Args: []string{"export", "--run", "{job}/run", "--out", "{job}/model"}},
		},
	}
	j, err := r.Create(ctx, spec)
	if err != nil {
		return Job{}, err
	}
	fail := func(err error) (Job, error) {
		r.st.SetJobStatus(context.WithoutCancel(ctx), j.ID, "failed", err.Error())
		return Job{}, err
	}
	if err := writeFileAtomic(filepath.Join(j.Spec.Dir, "clips.jsonl"), []byte(b.String())); err != nil {
		return fail(err)
	}
	if cfg.SpeakerInit != nil {
		raw := make([]byte, 4*len(cfg.SpeakerInit))
		for i, v := range cfg.SpeakerInit {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
		}
		if err := writeFileAtomic(filepath.Join(j.Spec.Dir, "speaker-init.bin"), raw); err != nil {
			return fail(err)
		}
	}
	return j, nil
}

// SeedSpeakers is a voice model whose seeds stand for speaker vectors (ChatTTS).
type SeedSpeakers interface {
	tts.Engine
	SampleSpeaker(seed int64) ([]float32, error)
}

// StartingSpeaker is the speaker vector a voice fine-tune starts from: of n seed speakers
// (CandidateSeeds), the one the speaker encoder finds closest to the person over the dataset's
// startingClips training clips nearest 5 s (one clip's embedding is a noisy judge).
func StartingSpeaker(ctx context.Context, d *clone.Dataset, eng SeedSpeakers, emb Embedder, n int, progress func(done, total int)) (seed int64, sim float64, spk []float32, err error) {
	train, _, err := SplitClips(d, 0.2)
	if err != nil {
		return 0, 0, nil, err
	}
	var ids []string
	for _, c := range train {
		ids = append(ids, c.ID)
	}
	clips, err := ClipsNear(d, ids, 5, startingClips)
	if err != nil {
		return 0, 0, nil, err
	}
	var person []Utterance
	for _, c := range clips {
		pcm, err := d.ReadClip(c.Path) // clips are 16 kHz
		if err != nil {
			return 0, 0, nil, err
		}
		person = append(person, Utterance{PCM: pcm, Text: c.Text})
	}
	if seed, sim, err = ClosestSeed(ctx, eng, emb, person, n, progress); err != nil {
		return 0, 0, nil, err
	}
	spk, err = eng.SampleSpeaker(seed)
	return seed, sim, spk, err
}

// startingClips is how many of the person's clips choose the starting speaker.
const startingClips = 3

// TrainedSpeaker reads the speaker vector a finished voice job exported.
func TrainedSpeaker(j Job) ([]float32, error) {
	p := filepath.Join(ModelDir(j), "speaker.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("tune: job %d has no trained speaker: %w", j.ID, err)
	}
	var s struct {
		Dim  int       `json:"dim"`
		Data []float32 `json:"data"`
	}
	if err := json.Unmarshal(b, &s); err != nil || s.Dim != len(s.Data) || s.Dim == 0 {
		return nil, fmt.Errorf("tune: %s is damaged", p)
	}
	for _, v := range s.Data {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("tune: %s holds a non-finite value (the training diverged)", p)
		}
	}
	return s.Data, nil
}

// InstallVoice adds a finished voice job's result to the library as voice name: an embedding
// voice (the trained speaker) for the voice model; when the GPT was trained, the exported model
// is installed first as the local tts model "chattts-<dataset>" and the voice names it in its
// description. Nothing is left half-installed: a voice that cannot be saved takes its model
// back out, and puts back the earlier fine-tune it replaced. It returns the model id installed
// ("" when none).
func InstallVoice(ctx context.Context, mgr *assets.Manager, lib *voices.Library, j Job, name string, overwrite bool) (string, error) {
	m, err := TTSMetaOf(j)
	if err != nil {
		return "", err
	}
	if j.Status != "done" {
		return "", fmt.Errorf("tune: job %d is %s, not done", j.ID, j.Status)
	}
	spk, err := TrainedSpeaker(j)
	if err != nil {
		return "", err
	}
	if _, err := lib.Get(name); err == nil && !overwrite {
		return "", fmt.Errorf("%w: %s (choose another name, or replace it)", voices.ErrExists, name)
	}
	v := voices.New(name, "chattts", voices.KindEmbedding)
	v.Embedding = &voices.Embedding{Dim: len(spk), Data: spk}
	v.Description = fmt.Sprintf("%s's voice, fine-tuned from %s on %d clips", m.Name, filepath.Base(m.Model), len(m.Train))
	modelID := ""
	var in *localInstall
	if m.GPT {
		// the model is named after the voice, so a second whole-model fine-tune of a dataset
		// installs beside the first under another voice name, or replaces it with the voice
		modelID = "chattts-" + strings.TrimPrefix(LocalID(name), "sensevoice-")
		files := []string{}
		for _, f := range []string{"config.json", "gpt.onnx", "gpt.int8.onnx", "decoder.onnx", "vocos.onnx", "dvae_encoder.onnx", "tokenizer.json", "spk_stat.bin"} {
			if _, err := os.Stat(filepath.Join(ModelDir(j), f)); err == nil {
				files = append(files, f)
			}
		}
		lm := assets.LocalModel{ID: modelID, Kind: assets.KindTTS, Files: files,
			Description: fmt.Sprintf("ChatTTS fine-tuned on %s's voice from %s", m.Name, filepath.Base(m.Model))}
		in, err = installLocal(ctx, mgr, ModelDir(j), lm, overwrite, j.Spec.Dir)
		if errors.Is(err, errRegistryModel) {
			return "", fmt.Errorf("%w: %s is one of Parley's models; choose another voice name", voices.ErrExists, modelID)
		}
		if err != nil {
			return "", fmt.Errorf("tune: installing the fine-tuned model: %w", err)
		}
		v.Description += "; speak it with the model " + modelID + " (parley say --model $(parley models path " + modelID + "))"
	}
	if err := lib.Save(v, overwrite); err != nil {
		if in != nil {
			if uerr := in.Undo(ctx); uerr != nil {
				return "", fmt.Errorf("%w (and undoing the model install: %v)", err, uerr)
			}
		}
		return "", err
	}
	if in != nil {
		in.Keep()
	}
	return modelID, nil
}
