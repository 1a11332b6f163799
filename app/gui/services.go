package gui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/device"
	"github.com/parley-voice/parley/llm/builtin"
	"github.com/parley-voice/parley/llm/discover"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/tts/espeak"
	"github.com/parley-voice/parley/voices"
)

// modelService adapts assets.Manager; progress events go to the pull that asked.
type modelService struct {
	log   *slog.Logger
	mu    sync.Mutex
	m     *assets.Manager
	stamp string // the registry files' sizes and times when m was made
	subs  map[string]func(assets.Event)
}

func newModelService(log *slog.Logger) (*modelService, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &modelService{log: log, subs: map[string]func(assets.Event){}}
	if err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// reload reads the registry again when its files changed: models installed since (a
// fine-tuned recogniser or voice, `parley models import`) are listed, as the wizard's
// Install step says they are. The Models page lists every few seconds while shown; an
// unchanged registry costs two stats.
func (s *modelService) reload() error {
	stamp := registryStamp()
	s.mu.Lock()
	same := s.m != nil && stamp == s.stamp
	s.mu.Unlock()
	if same {
		return nil
	}
	reg, err := assets.DefaultRegistry()
	if err != nil {
		return err
	}
	m, err := assets.NewManager(reg, assets.Options{Progress: s.dispatch, Log: s.log})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.m, s.stamp = m, stamp
	s.mu.Unlock()
	return nil
}

// registryStamp names the state of the files the registry is read from beyond the binary's
// own: the models directory's local manifest and the user's override.
func registryStamp() string {
	var b strings.Builder
	for _, p := range []string{filepath.Join(assets.ModelsDir(), assets.LocalManifest), assets.OverridePath()} {
		if st, err := os.Stat(p); err == nil {
			fmt.Fprintf(&b, "%s %d %d;", p, st.Size(), st.ModTime().UnixNano())
		} else {
			fmt.Fprintf(&b, "%s -;", p)
		}
	}
	return b.String()
}

func (s *modelService) manager() *assets.Manager {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m
}

func (s *modelService) dispatch(ev assets.Event) {
	s.mu.Lock()
	fn := s.subs[ev.Model]
	s.mu.Unlock()
	if fn != nil {
		fn(ev)
	}
}

func (s *modelService) List(ctx context.Context) ([]assets.ModelStatus, error) {
	if err := s.reload(); err != nil {
		s.log.Warn("reloading the model registry", "err", err) // the last one still lists
	}
	list, err := s.manager().List(ctx, assets.CheckSize)
	for i := range list {
		if list[i].ID == factory.ChatTTS && s.releaseKnown() {
			list[i].Downloadable = true // through its release, converted (Pull)
		}
	}
	return list, err
}

// releaseKnown says whether the registry has ChatTTS's official release to convert.
func (s *modelService) releaseKnown() bool {
	_, err := s.manager().Registry().Lookup(factory.ChatTTSRelease)
	return err == nil
}

// Pull installs a model; the ChatTTS voice is its official release downloaded and converted
// in Go (factory.PullChatTTS), its download's progress shown on the voice's row.
func (s *modelService) Pull(ctx context.Context, id string, progress func(assets.Event)) error {
	ids := []string{id}
	if id == factory.ChatTTS {
		ids = append(ids, factory.ChatTTSRelease)
	}
	s.mu.Lock()
	for _, k := range ids {
		s.subs[k] = nil
		if progress != nil {
			s.subs[k] = func(ev assets.Event) {
				if ev.Model == factory.ChatTTSRelease && ev.Phase == "done" { // the release is in; the voice is not yet
					ev.Phase, ev.Message = "converting", "converting the release into the voice (about a minute)"
				}
				ev.Model = id
				progress(ev)
			}
		}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		for _, k := range ids {
			delete(s.subs, k)
		}
		s.mu.Unlock()
	}()
	if id == factory.ChatTTS {
		if progress != nil {
			progress(assets.Event{Model: id, Phase: "release", Message: "downloading the official release, then converting it (about a minute)"})
		}
		_, err := factory.PullChatTTS(ctx, s.manager(), s.log)
		return err
	}
	return s.manager().Pull(ctx, id)
}

func (s *modelService) Verify(ctx context.Context, id string) (assets.ModelStatus, error) {
	return s.manager().Verify(ctx, id)
}

func (s *modelService) Remove(ctx context.Context, id string) error {
	return s.manager().Remove(ctx, id)
}

// voiceService is the voice library with previews on the configured speaker, through any
// engine tts/engines opens (each opened once, on first use).
type voiceService struct {
	lib  *voices.Library
	cfg  *config.Config
	fac  *factory.Factory // the app's
	log  *slog.Logger
	mu   sync.Mutex
	open map[string]tts.Engine
	// speaker returns the running assistant's way to play audio (nil: none, or text only)
	speaker func() func(ctx context.Context, b *audio.Buffer) error
}

func (s *voiceService) List() ([]*voices.Voice, error) {
	if s.lib == nil {
		return nil, ErrUnavailable
	}
	list, errs := s.lib.List()
	return list, errors.Join(errs...)
}

func (s *voiceService) Save(v *voices.Voice) error {
	if s.lib == nil {
		return ErrUnavailable
	}
	return s.lib.Save(v, false)
}

func (s *voiceService) engine(name string) (tts.Engine, error) {
	name = factory.EngineName(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.open[name]; e != nil {
		return e, nil
	}
	e, err := s.fac.Voice(factory.Voice{Engine: name})
	if err != nil {
		return nil, err
	}
	if s.open == nil {
		s.open = map[string]tts.Engine{}
	}
	s.open[name] = e
	return e, nil
}

func (s *voiceService) Capabilities(engine string) (tts.Capabilities, error) {
	e, err := s.engine(engine)
	if err != nil {
		return tts.Capabilities{}, err
	}
	c := e.Capabilities()
	if len(c.Voices) == 0 && normEngine(c.Engine) == "espeak" {
		// espeak-ng's voices are its languages; its report lists a few for people, the
		// library has them all
		c.Voices, _ = espeak.Voices()
	}
	return c, nil
}

// Engines implements Voices.
func (s *voiceService) Engines() []string { return append([]string(nil), engines.Names...) }

// Synthesize implements Voices: a library voice named by req.Voice is applied as the
// assistant applies it (its seed, embedding or mix; the panel's controls win).
func (s *voiceService) Synthesize(ctx context.Context, engine string, req tts.Request) (*audio.Buffer, error) {
	e, err := s.engine(engine)
	if err != nil {
		return nil, err
	}
	if s.lib != nil && req.Voice != "" && voices.ValidName(req.Voice) == nil {
		if v, err := s.lib.Get(req.Voice); err == nil {
			req.Voice = ""
			name := e.Capabilities().Engine
			req, err = engines.ApplyVoice(req, v, name, engines.Explicit{Temperature: true, TopP: true, TopK: true, Speed: true, Seed: req.HasSeed})
			if err != nil {
				return nil, err
			}
		}
	}
	st, err := e.Synthesize(ctx, req)
	if err != nil {
		return nil, err
	}
	return tts.ReadAll(ctx, st)
}

// Play implements Voices: through the assistant's own speaker when it has one (so that its
// microphone knows the preview as Parley's voice, not the user's), else on the configured
// output device.
func (s *voiceService) Play(ctx context.Context, b *audio.Buffer) error {
	if s.speaker != nil {
		if play := s.speaker(); play != nil {
			return play(ctx, b)
		}
	}
	out := ""
	if s.cfg != nil {
		out = s.cfg.Audio.Output
	}
	return play(ctx, s.log, out, b.Data, b.SampleRate)
}

func (s *voiceService) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for name, e := range s.open {
		errs = append(errs, e.Close())
		delete(s.open, name)
	}
	return errors.Join(errs...)
}

// play plays mono samples at rate on an output device and waits for the end.
func play(ctx context.Context, log *slog.Logger, out string, pcm []float32, rate int) error {
	h, err := device.Open(log)
	if err != nil {
		return err
	}
	defer h.Close()
	p, err := h.OpenPlayback(device.PlaybackConfig{StreamConfig: device.StreamConfig{Device: out}, Format: audio.Format{SampleRate: rate, Channels: 1}, Echo: -1})
	if err != nil {
		return err
	}
	defer p.Close()
	if _, err := p.Write(ctx, pcm); err != nil {
		return err
	}
	return p.Drain(ctx)
}

// deviceService lists PortAudio devices and runs the record-and-play test.
type deviceService struct{ log *slog.Logger }

func (s deviceService) List() ([]Device, error) {
	h, err := device.Open(s.log)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	infos, err := h.Devices()
	if err != nil {
		return nil, err
	}
	var out []Device
	for _, i := range infos {
		out = append(out, Device{Name: i.Name, Input: i.MaxInputChannels > 0, Output: i.MaxOutputChannels > 0, Default: i.DefaultInput || i.DefaultOutput})
	}
	return out, nil
}

func (s deviceService) Test(ctx context.Context, in, out string, level func(float64)) error {
	h, err := device.Open(s.log)
	if err != nil {
		return err
	}
	defer h.Close()
	c, err := h.OpenCapture(device.CaptureConfig{StreamConfig: device.StreamConfig{Device: in}, Format: audio.Mono16k})
	if err != nil {
		return fmt.Errorf("microphone: %w", err)
	}
	rec := make([]float32, 0, 3*16000)
	buf := make([]float32, 1600)
	for len(rec) < 3*16000 {
		n, err := c.Read(ctx, buf)
		if err != nil {
			c.Close()
			return fmt.Errorf("microphone: %w", err)
		}
		rec = append(rec, buf[:n]...)
		level(audio.DB(audio.RMS(buf[:n])))
	}
	c.Close()
	return play(ctx, s.log, out, rec, 16000)
}

// prefsService is Prefs over the store's settings table (keys prefixed "ui.").
type prefsService struct{ s *store.Store }

// Pref implements Prefs.
func (p prefsService) Pref(key string) (string, bool) {
	v, ok, err := p.s.Setting(context.Background(), "ui."+key)
	return v, ok && err == nil
}

// SetPref implements Prefs.
func (p prefsService) SetPref(key, value string) error {
	return p.s.SetSetting(context.Background(), "ui."+key, value)
}

// historyService is the store.
type historyService struct{ s *store.Store }

func (h historyService) Conversations(ctx context.Context, limit int) ([]store.Conversation, error) {
	return h.s.Conversations(ctx, store.ListOptions{Limit: limit})
}

func (h historyService) Search(ctx context.Context, q string, limit int) ([]store.Hit, error) {
	return h.s.Search(ctx, q, store.SearchOptions{Limit: limit})
}

func (h historyService) Turns(ctx context.Context, id int64) ([]store.Turn, error) {
	return h.s.Turns(ctx, id)
}

func (h historyService) Export(ctx context.Context, w io.Writer, id int64, f store.Format) error {
	return h.s.Export(ctx, w, id, f, store.ExportOptions{})
}

func (h historyService) Delete(ctx context.Context, id int64) error {
	_, err := h.s.DeleteConversation(ctx, id)
	return err
}

// discoverServers probes the usual local LLM endpoints.
func discoverServers(ctx context.Context) []LLMServer {
	var out []LLMServer
	for _, f := range discover.Probe(ctx, discover.DefaultCandidates(), 2*time.Second) {
		s := LLMServer{Name: f.Name, Kind: f.Kind, URL: f.URL}
		if f.Err != nil {
			s.Err = f.Err.Error()
		}
		for _, m := range f.Models {
			s.Models = append(s.Models, m.ID)
		}
		out = append(out, s)
	}
	if ids := builtin.Installed(); len(ids) > 0 {
		out = append(out, LLMServer{Name: "built-in", Kind: discover.KindBuiltin, Models: ids})
	}
	return out
}
