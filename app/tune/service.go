package tune

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/voices/clone"
)

// The fine-tune service: what a face (the desktop wizard, `parley finetune`) calls to turn a
// person's dataset into a recogniser or a voice that knows them. Each role is a small
// interface; CloneService (the datasets' engines and zero-shot clones) and TrainingService
// (the jobs, their evaluation and install) implement them on the installed models. The
// desktop's microphone and speaker are not here: they are the face's.

// Goals: what a dataset is for.
const (
	GoalVoice       = "voice"       // fine-tune a voice that sounds like the person
	GoalRecognition = "recognition" // fine-tune the recogniser on the person's speech
)

// Preparer is what the collect, slice and label steps need beyond the datasets themselves
// (voices/clone): where they live, decoding of imported files, and the engines that cut and
// transcribe them.
type Preparer interface {
	// Dir is the folder the datasets live in (one sub-folder each).
	Dir() string
	// Open decodes an audio file of any format (clone.OpenFunc).
	Open(ctx context.Context, path string) (audio.Source, func(), error)
	// Segmenter opens the voice activity detector of the slice step.
	Segmenter() (clone.Segmenter, func(), error)
	// Recogniser opens the speech recogniser of the label step.
	Recogniser(ctx context.Context) (*Recogniser, error)
	// RecogniserInfo names the recogniser Recogniser would open, without loading it.
	RecogniserInfo(ctx context.Context) (id string, demo bool, err error)
}

// Cloner makes zero-shot clone voices (no training) and lets a person hear and score them.
type Cloner interface {
	// CloneReady says why a zero-shot clone cannot be made here (nil when it can).
	CloneReady() error
	// CloneVoice makes a zero-shot clone voice from a clip (16 kHz mono) and its transcript
	// (Clone: the speech trimmed, the language checked, the DVAE prompt codes, the closest
	// seed speaker) and adds it to the voice library under name. progress hears what is
	// being done.
	CloneVoice(ctx context.Context, pcm []float32, text, name string, progress func(string)) (*CloneResult, error)
	// CloneDataset makes (or makes again) a dataset's zero-shot clone voice, name, from its
	// training clip nearest secs long.
	CloneDataset(ctx context.Context, d *clone.Dataset, name string, secs float64, progress func(string)) (*CloneResult, *clone.Clip, error)
	// CompareVoices scores a random seed voice and the library voice name against the
	// dataset's held-out clips (speaker similarity, the recogniser's CER) on up to n of their
	// sentences; it returns the scores, the sentences, and the random seed.
	CompareVoices(ctx context.Context, d *clone.Dataset, name string, n int, progress func(string)) ([]VoiceScore, []string, int64, error)
	// Say synthesises text with the library voice name (or, for "", seed's speaker), as
	// 16 kHz mono.
	Say(ctx context.Context, name string, seed int64, text string) ([]float32, error)
	// HasVoice says whether the voice library holds name.
	HasVoice(name string) bool
}

// Readiness is the train step's checklist: whether a goal can be trained here, with what,
// from what, and on how little.
type Readiness interface {
	// Supports says why this build cannot fine-tune for goal (nil when it can).
	Supports(goal string) error
	// Check finds Python, PyTorch and the trainer once; the error says exactly what to install.
	Check(ctx context.Context) (string, error)
	// Base names the starting point a new job of goal fine-tunes.
	Base(ctx context.Context, goal string) (id string, demo bool, err error)
	// MinClips is the fewest usable clips a job of goal accepts.
	MinClips(goal string) int
}

// Jobs are a dataset's fine-tune jobs. They run in this process, one at a time; a job a
// closed Parley left behind is found again (interrupted) and resumes from its last
// checkpoint.
type Jobs interface {
	// Latest is the dataset's newest job of goal (nil when there is none).
	Latest(ctx context.Context, d *clone.Dataset, goal string) (*Job, error)
	// Create records a new job for the dataset (the clips it trains on and holds out).
	Create(ctx context.Context, d *clone.Dataset, goal string, opt JobOptions) (Job, error)
	// Start runs a job, or resumes one that stopped; events arrive on the job's goroutine.
	// wait returns when the job has stopped: nil when it finished, context.Canceled when
	// cancelled (ctx), else why it failed.
	Start(ctx context.Context, id int64, on Handler) (wait func() error, err error)
}

// Evaluator is the evaluate step.
type Evaluator interface {
	// Evaluate compares the starting point and the fine-tuned model on the held-out clips
	// and stores the result with the job.
	Evaluate(ctx context.Context, j Job) (*Evaluation, error)
	// Evaluation is the stored result of Evaluate (nil when the job was not evaluated).
	Evaluation(j Job) *Evaluation
}

// Installer is the install step.
type Installer interface {
	// Install adds the fine-tuned model (recogniser or voice) for use; it returns its id.
	Install(ctx context.Context, j Job) (string, error)
}

var (
	_ Preparer  = (*CloneService)(nil)
	_ Cloner    = (*CloneService)(nil)
	_ Readiness = (*TrainingService)(nil)
	_ Jobs      = (*TrainingService)(nil)
	_ Evaluator = (*TrainingService)(nil)
	_ Installer = (*TrainingService)(nil)
)

// JobOptions are the choices a new job takes from the train step.
type JobOptions struct {
	// WholeModel (the voice goal): train the voice model's GPT, embeddings and decoder with
	// the speaker, making a new model, not only a speaker vector for the installed one.
	WholeModel bool
	// Progress hears the steps of the preparation done before the job exists (the voice's
	// seed-speaker search), so the page can say how far it is and how long it has left.
	Progress func(done, total int)
	// Epochs and LR override the recipe's training length and learning rate for this job (0:
	// the service's Epochs or VoiceEpochs, else the recipe's): `parley finetune`'s --epochs
	// and --lr.
	Epochs int
	LR     float64
	// Seeds (the voice goal) is how many seed speakers are tried for the starting speaker (0:
	// the service's Voice.Seeds, else 8; negative: none, the job starts from the model's mean
	// speaker): `parley finetune train --seeds`.
	Seeds int
	// Official (the recogniser goal) is FunASR's SenseVoiceSmall directory (model.pt, am.mvn,
	// *.bpe.model) to start from instead of the installed recogniser's model.onnx: `parley
	// finetune asr --official`.
	Official string
}

// Evaluation is a fine-tune's before/after, as the evaluate step shows it.
type Evaluation struct {
	Metric        string  // "character error rate" (lower is better) or, for a voice, "speaker similarity"
	Before, After float64 // for a voice: a random voice's similarity and the fine-tuned one's
	Items         []EvalItem
	// Voices (the voice goal): each voice scored on the held-out sentences — a random seed
	// voice first, the fine-tuned voice last, the zero-shot clone between them.
	Voices    []VoiceScore
	Improved  bool
	Message   string
	Installed string // the id (a voice: its name) it was installed as ("" until then)
	Model     string // a voice installed with a model of its own: the model's id
}

// EvalItem is one held-out clip: what it says, and what each model made of it.
type EvalItem struct {
	Clip          string // clip id (its audio plays from the dataset)
	Path          string // the clip's file, relative to the dataset
	Ref           string
	Before, After string
	BeforeErr     int // character errors
	AfterErr      int
	// PlayA and PlayB (the voice goal): the sentence spoken by the random voice and by the
	// fine-tuned one, relative to the dataset.
	PlayA, PlayB string
}

// Recogniser is the label step's recogniser and what the wizard says about it.
type Recogniser struct {
	clone.Transcriber
	Model string // the model's id
	Demo  bool   // demo-grade: expect to correct many transcripts
	Close func()
}

// ErrNoRecogniser: no speech recognition model is installed.
var ErrNoRecogniser = errors.New("no speech recognition model is installed")

// ErrNoCloneModel: no speech-token (ChatTTS) voice model to clone with.
var ErrNoCloneModel = errors.New("cloning needs a ChatTTS voice model: import an export of ChatTTS in Models (`parley models import DIR`), or install the demo voice")

// ErrVoiceTraining: no voice models to fine-tune with (a TrainingService without a
// CloneService).
var ErrVoiceTraining = errors.New("fine-tuning a voice needs Parley's voice models, which this window was started without; " +
	"your dataset is kept, and “Improve recognition of my voice” trains on it")

// DatasetsDir is where `parley finetune` and the wizard keep their datasets.
func DatasetsDir() string { return filepath.Join(assets.DataDir(), "finetune") }

// Sentence words an error for a status line or a stored message: the package prefix off, a
// capital, a stop.
func Sentence(msg string) string {
	msg = strings.TrimPrefix(msg, "clone: ")
	if msg == "" {
		return msg
	}
	msg = strings.ToUpper(msg[:1]) + msg[1:]
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}
