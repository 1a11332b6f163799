// Package espeak is Parley's embedded default speech engine, built on Debian's libespeak-ng
// through cgo, and the IPA phonemiser the Kokoro engine uses.
//
// libespeak-ng keeps global state and is not thread-safe, so every call into it goes through
// one process-wide lock (the only package-level mutable state here, mirroring the library's
// own).
package espeak

/*
#cgo pkg-config: espeak-ng
#include <stdlib.h>
#include <espeak-ng/speak_lib.h>

int parley_init(void);
int parley_synth(const char *text, size_t size);
const char *parley_next_phonemes(const void **p);
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// ErrInit is returned when libespeak-ng cannot start (no data files).
var ErrInit = errors.New("espeak: cannot initialise libespeak-ng")

// lib is the process-wide handle on libespeak-ng.
var lib struct {
	once sync.Once
	mu   sync.Mutex
	rate int
	err  error
	cur  *collector // the synthesis in progress (guarded by mu)
}

// collector receives samples from the synthesis callback.
type collector struct {
	ctx  context.Context
	buf  []float32
	stop bool
}

//export parleySynthCallback
func parleySynthCallback(wav *C.short, n C.int, events *C.espeak_EVENT) C.int {
	c := lib.cur
	if c == nil {
		return 1
	}
	if c.ctx.Err() != nil {
		c.stop = true
		return 1 // abort synthesis: cancellation lands within one callback buffer (40 ms)
	}
	if wav != nil && n > 0 {
		s := unsafe.Slice((*int16)(unsafe.Pointer(wav)), int(n))
		for _, v := range s {
			c.buf = append(c.buf, float32(v)/32768)
		}
	}
	return 0
}

func initLib() (int, error) {
	lib.once.Do(func() {
		r := int(C.parley_init())
		if r <= 0 {
			lib.err = fmt.Errorf("%w (espeak_Initialize returned %d; is espeak-ng-data installed?)", ErrInit, r)
			return
		}
		lib.rate = r
	})
	return lib.rate, lib.err
}

// SampleRate is libespeak-ng's output rate (22050 Hz with the standard data).
func SampleRate() (int, error) { return initLib() }

// params is one synthesis setting of voice and prosody.
type params struct {
	voice  string // espeak voice name, e.g. "en-us+f3"
	rate   int    // words per minute, 80..450
	pitch  int    // 0..100
	rng    int    // pitch range 0..100
	volume int    // 0..200
	seed   uint32 // libespeak-ng draws noise and jitter from libc rand(); seeded per call
}

// synth renders text with p. It returns what was synthesized before ctx was cancelled along
// with ctx.Err().
func synth(ctx context.Context, text string, p params) ([]float32, error) {
	if _, err := initLib(); err != nil {
		return nil, err
	}
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := setVoice(p.voice); err != nil {
		return nil, err
	}
	C.espeak_SetParameter(C.espeakRATE, C.int(clamp(p.rate, 80, 450)), 0)
	C.espeak_SetParameter(C.espeakPITCH, C.int(clamp(p.pitch, 0, 100)), 0)
	C.espeak_SetParameter(C.espeakRANGE, C.int(clamp(p.rng, 0, 100)), 0)
	C.espeak_SetParameter(C.espeakVOLUME, C.int(clamp(p.volume, 0, 200)), 0)
	C.srand(C.uint(p.seed)) // makes the same text and parameters give identical samples
	col := &collector{ctx: ctx}
	lib.cur = col
	defer func() { lib.cur = nil }()
	ct := C.CString(text)
	defer C.free(unsafe.Pointer(ct))
	rc := C.parley_synth(ct, C.size_t(len(text)+1))
	if col.stop || ctx.Err() != nil {
		return col.buf, ctx.Err()
	}
	if rc != C.EE_OK {
		return nil, fmt.Errorf("espeak: synthesis failed (code %d)", int(rc))
	}
	return col.buf, nil
}

func setVoice(name string) error {
	if trySetVoice(name) {
		return nil
	}
	// "en-gb+f3": espeak_SetVoiceByName knows file names ("en-US" matches "en-us") but not
	// every language tag; look the language up in the voice list and use its file.
	lang, variant, _ := strings.Cut(name, "+")
	if id := voiceFile(strings.ToLower(lang)); id != "" {
		if variant != "" {
			id += "+" + variant
		}
		if trySetVoice(id) {
			return nil
		}
	}
	return fmt.Errorf("espeak: voice %q not found", name)
}

func trySetVoice(name string) bool {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	return C.espeak_SetVoiceByName(cn) == C.EE_OK
}

// voiceFile finds the voice file identifier ("gmw/en") for a language tag. Caller holds mu.
func voiceFile(lang string) string {
	for _, v := range listVoices() {
		if v.lang == lang {
			return v.file
		}
	}
	return ""
}

type voiceEntry struct{ lang, name, file string }

// listVoices reads espeak_ListVoices. Caller holds mu.
func listVoices() []voiceEntry {
	list := C.espeak_ListVoices(nil)
	var out []voiceEntry
	for i := 0; list != nil && i < 10000; i++ {
		v := *(**C.espeak_VOICE)(unsafe.Add(unsafe.Pointer(list), uintptr(i)*unsafe.Sizeof(list)))
		if v == nil {
			break
		}
		e := voiceEntry{name: C.GoString(v.name), file: C.GoString(v.identifier)}
		if v.languages != nil {
			// languages: a priority byte then a NUL-terminated name, repeated
			e.lang = C.GoString((*C.char)(unsafe.Add(unsafe.Pointer(v.languages), 1)))
		}
		if strings.HasPrefix(e.file, "mb/") { // MBROLA voices need separately installed data
			continue
		}
		out = append(out, e)
	}
	return out
}

// Phonemes returns the IPA phonemes (with stress marks) for text in the given espeak voice or
// language ("en-us", "en-gb", "fr", "cmn"…), clauses separated by single spaces. It is what the
// `espeak-ng --ipa -q -v VOICE` command prints, with its line breaks turned into spaces.
func Phonemes(text, voice string) (string, error) {
	if _, err := initLib(); err != nil {
		return "", err
	}
	if voice == "" {
		voice = "en-us"
	}
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if err := setVoice(voice); err != nil {
		return "", err
	}
	ct := C.CString(text)
	defer C.free(unsafe.Pointer(ct))
	p := unsafe.Pointer(ct)
	var parts []string
	for i := 0; p != nil && i < 1<<20; i++ {
		r := C.parley_next_phonemes(&p)
		if r == nil {
			break
		}
		if s := strings.TrimSpace(C.GoString(r)); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " "), nil
}

// Voices lists the languages libespeak-ng has voices for ("en-us", "cmn", …).
func Voices() ([]string, error) {
	if _, err := initLib(); err != nil {
		return nil, err
	}
	lib.mu.Lock()
	defer lib.mu.Unlock()
	var out []string
	for _, v := range listVoices() {
		if v.lang != "" {
			out = append(out, v.lang)
		}
	}
	return out, nil
}

// Language is one language libespeak-ng has a voice for.
type Language struct {
	Tag  string // espeak's language tag: "en-gb", "cmn", "pt-br"
	Name string // the voice's name: "English (Great Britain)"
}

// Languages lists every language libespeak-ng has a voice for, with the voice's name
// (MBROLA voices, which need data installed apart, are left out).
func Languages() ([]Language, error) {
	if _, err := initLib(); err != nil {
		return nil, err
	}
	lib.mu.Lock()
	defer lib.mu.Unlock()
	var out []Language
	seen := map[string]bool{}
	for _, v := range listVoices() {
		if v.lang != "" && !seen[v.lang] {
			seen[v.lang] = true
			out = append(out, Language{Tag: v.lang, Name: v.name})
		}
	}
	return out, nil
}

// Info returns libespeak-ng's version and the espeak-ng-data directory it uses.
func Info() (version, dataDir string, err error) {
	if _, err := initLib(); err != nil {
		return "", "", err
	}
	lib.mu.Lock()
	defer lib.mu.Unlock()
	var path *C.char
	v := C.espeak_Info(&path)
	return C.GoString(v), C.GoString(path), nil
}

func clamp(v, lo, hi int) int { return max(lo, min(hi, v)) }
