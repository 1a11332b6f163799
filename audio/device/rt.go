package device

/*
#cgo pkg-config: portaudio-2.0 libpulse
#include <portaudio.h>
#include <pulse/pulseaudio.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The real-time side of a stream, in C: PortAudio's callback copies between the device and
// single-producer/single-consumer rings in C memory and never enters Go. A Go callback costs a
// thread switch into the Go runtime on every device buffer (100 a second per stream), and the
// runtime's monitor then polls at its fastest: about 2 % of a core per stream at rest, most of
// an idle listening app's CPU. Go reads and writes the same rings; a reader or writer that has
// to wait arms a flag and sleeps on a pipe, which the callback writes one byte to when it has
// moved audio and the flag was armed.

typedef struct {
	uint64_t w; char pad1[56]; // samples written (the producer's)
	uint64_t r; char pad2[56]; // samples read (the consumer's)
	float *buf;
	uint64_t mask;
} prt_ring;

// prt_counters mirrors the Go type counters field for field.
typedef struct {
	uint64_t callbacks, frames, overflows, dropped, underflows, host_flags;
	int64_t first_time; // stream time (ns) of the first frame, +1 so 0 means unset
} prt_counters;

typedef struct {
	prt_ring ring;
	prt_counters ctr;
	int channels;
	int wake_fd;      // write end of the reader's pipe
	uint32_t waiting; // the reader sleeps on the pipe
	uint64_t want;    // ... until the ring holds this many samples
} prt_capture;

typedef struct {
	prt_ring ring;
	prt_ring echo;
	prt_counters ctr;
	int channels;
	int has_echo;
	uint64_t poison;       // samples before this write position are dropped, not played
	uint64_t handed;       // ring read position after the last callback
	uint64_t echo_dropped; // echo samples dropped because nobody read them
	uint32_t streaming;    // mid-stream: running dry is an underflow
	int space_fd;          // the writer's pipe (space in the ring, audio handed)
	uint32_t space_waiting;
	int echo_fd;           // the echo reader's pipe
	uint32_t echo_waiting;
	uint64_t echo_want;
} prt_playback;

typedef struct {
	prt_capture *cap;
	prt_playback *play;
	PaStream *pa;
	int closed;
} prt_stream;

static inline uint64_t prt_ld(uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void prt_st(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static inline void prt_add(uint64_t *p, uint64_t v) { __atomic_add_fetch(p, v, __ATOMIC_RELAXED); }

static int prt_ring_init(prt_ring *q, uint64_t capacity) {
	uint64_t n = 1;
	while (n < capacity) n <<= 1;
	q->buf = calloc(n, sizeof(float));
	q->mask = n - 1;
	return q->buf != NULL;
}

static uint64_t prt_ring_len(prt_ring *q) { return prt_ld(&q->w) - prt_ld(&q->r); }
static uint64_t prt_ring_free(prt_ring *q) { return q->mask + 1 - prt_ring_len(q); }

static uint64_t prt_ring_write(prt_ring *q, const float *p, uint64_t n) {
	if (n == 0) return 0;
	uint64_t w = prt_ld(&q->w), size = q->mask + 1, free = size - (w - prt_ld(&q->r));
	if (n > free) n = free;
	uint64_t at = w & q->mask, first = size - at;
	if (first > n) first = n;
	memcpy(q->buf + at, p, first * sizeof(float));
	memcpy(q->buf, p + first, (n - first) * sizeof(float));
	prt_st(&q->w, w + n);
	return n;
}

static uint64_t prt_ring_read(prt_ring *q, float *p, uint64_t n) {
	if (n == 0) return 0;
	uint64_t r = prt_ld(&q->r), avail = prt_ld(&q->w) - r, size = q->mask + 1;
	if (n > avail) n = avail;
	uint64_t at = r & q->mask, first = size - at;
	if (first > n) first = n;
	memcpy(p, q->buf + at, first * sizeof(float));
	memcpy(p + first, q->buf, (n - first) * sizeof(float));
	prt_st(&q->r, r + n);
	return n;
}

static uint64_t prt_ring_discard(prt_ring *q, uint64_t n) {
	uint64_t r = prt_ld(&q->r), avail = prt_ld(&q->w) - r;
	if (n > avail) n = avail;
	prt_st(&q->r, r + n);
	return n;
}

static void prt_wake(int fd, uint32_t *waiting) {
	if (fd >= 0 && __atomic_exchange_n(waiting, 0, __ATOMIC_ACQ_REL)) {
		char b = 1;
		ssize_t r = write(fd, &b, 1); // a full pipe already wakes the reader
		(void)r;
	}
}

// prt_wake_when wakes a reader once the ring holds what it waits for.
static void prt_wake_when(int fd, uint32_t *waiting, prt_ring *q, uint64_t *want) {
	if (__atomic_load_n(waiting, __ATOMIC_ACQUIRE) && prt_ring_len(q) >= __atomic_load_n(want, __ATOMIC_ACQUIRE)) {
		prt_wake(fd, waiting);
	}
}

static void prt_first(prt_counters *c, double t) {
	if (__atomic_load_n(&c->first_time, __ATOMIC_ACQUIRE) == 0) {
		__atomic_store_n(&c->first_time, (int64_t)(t * 1e9) + 1, __ATOMIC_RELEASE);
	}
}

static void prt_capture_cb(prt_capture *c, const float *in, unsigned long frames, double adc, PaStreamCallbackFlags flags) {
	prt_first(&c->ctr, adc);
	uint64_t ch = c->channels, len = frames * ch;
	if (in != NULL) {
		uint64_t n = prt_ring_free(&c->ring) / ch * ch;
		if (n > len) n = len;
		prt_ring_write(&c->ring, in, n);
		if (n < len) {
			prt_add(&c->ctr.overflows, 1);
			prt_add(&c->ctr.dropped, (len - n) / ch);
		}
	}
	if (flags & (paInputOverflow | paInputUnderflow)) prt_add(&c->ctr.host_flags, 1);
	prt_add(&c->ctr.frames, frames);
	prt_add(&c->ctr.callbacks, 1);
	prt_wake_when(c->wake_fd, &c->waiting, &c->ring, &c->want);
}

static void prt_playback_cb(prt_playback *p, float *out, unsigned long frames, double dac, PaStreamCallbackFlags flags) {
	prt_first(&p->ctr, dac);
	uint64_t ch = p->channels, len = frames * ch;
	// barge-in: drop everything queued before the stop point
	uint64_t pos = prt_ld(&p->poison), read = prt_ld(&p->ring.r);
	if (read < pos) prt_ring_discard(&p->ring, pos - read);
	uint64_t n = prt_ring_read(&p->ring, out, len);
	if (n < len) {
		memset(out + n, 0, (len - n) * sizeof(float));
		if (__atomic_load_n(&p->streaming, __ATOMIC_ACQUIRE)) prt_add(&p->ctr.underflows, 1);
	}
	prt_st(&p->handed, prt_ld(&p->ring.r));
	if (p->has_echo) {
		uint64_t w = prt_ring_free(&p->echo) / ch * ch;
		if (w > len) w = len;
		prt_ring_write(&p->echo, out, w);
		if (w < len) prt_add(&p->echo_dropped, len - w);
		prt_wake_when(p->echo_fd, &p->echo_waiting, &p->echo, &p->echo_want);
	}
	if (flags & (paOutputUnderflow | paOutputOverflow)) prt_add(&p->ctr.host_flags, 1);
	prt_add(&p->ctr.frames, frames);
	prt_add(&p->ctr.callbacks, 1);
	prt_wake(p->space_fd, &p->space_waiting);
}

static int prt_callback(const void *in, void *out, unsigned long frames,
		const PaStreamCallbackTimeInfo *ti, PaStreamCallbackFlags flags, void *user) {
	prt_stream *s = user;
	if (s->cap != NULL) prt_capture_cb(s->cap, in, frames, ti->inputBufferAdcTime, flags);
	if (s->play != NULL && out != NULL) prt_playback_cb(s->play, out, frames, ti->outputBufferDacTime, flags);
	return paContinue;
}

static PaError prt_open(prt_stream *s, int inDev, int inCh, double inLat, int outDev, int outCh, double outLat,
		double rate, unsigned long frames, unsigned long flags) {
	PaStreamParameters in = {inDev, inCh, paFloat32, inLat, NULL}, out = {outDev, outCh, paFloat32, outLat, NULL};
	return Pa_OpenStream(&s->pa, inCh > 0 ? &in : NULL, outCh > 0 ? &out : NULL, rate, frames, flags, prt_callback, s);
}

static double prt_output_latency(PaStream *s) {
	const PaStreamInfo *i = Pa_GetStreamInfo(s);
	return i == NULL ? 0 : i->outputLatency;
}

static void prt_ring_free_buf(prt_ring *q) { free(q->buf); q->buf = NULL; }

// ---- A capture through PulseAudio's own API (pulse.go): the server hands fragments to
// libpulse's thread, whose read callback is prt_capture_cb's caller. No PortAudio and no ALSA
// plug-in in between: a seventh of their CPU at rest.

static double prt_mono(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct {
	pa_threaded_mainloop *ml;
	pa_context *ctx;
	pa_stream *st;
	prt_capture *cap;
	int rate, channels;
	int done;   // the context or the stream reached a final state, or is ready
	int failed; // ... a failed one
} prt_pulse;

static void prt_pulse_ctx_cb(pa_context *c, void *u) {
	prt_pulse *p = u;
	switch (pa_context_get_state(c)) {
	case PA_CONTEXT_READY: p->done = 1; break;
	case PA_CONTEXT_FAILED: case PA_CONTEXT_TERMINATED: p->done = 1; p->failed = 1; break;
	default: return;
	}
	pa_threaded_mainloop_signal(p->ml, 0);
}

static void prt_pulse_stream_cb(pa_stream *s, void *u) {
	prt_pulse *p = u;
	switch (pa_stream_get_state(s)) {
	case PA_STREAM_READY: p->done = 1; break;
	case PA_STREAM_FAILED: case PA_STREAM_TERMINATED: p->done = 1; p->failed = 1; break;
	default: return;
	}
	pa_threaded_mainloop_signal(p->ml, 0);
}

static void prt_pulse_read_cb(pa_stream *s, size_t nbytes, void *u) {
	prt_pulse *p = u;
	size_t frame = sizeof(float) * p->channels;
	while (pa_stream_readable_size(s) > 0) {
		const void *data;
		size_t n;
		if (pa_stream_peek(s, &data, &n) < 0 || n == 0) return;
		unsigned long frames = n / frame;
		// the fragment's first frame entered the source about its length ago
		prt_capture_cb(p->cap, data, frames, prt_mono() - (double)frames / p->rate, 0); // data NULL: a hole, counted, not written
		pa_stream_drop(s);
	}
}

// prt_pulse_wait waits, with the main loop locked, for the state callbacks' verdict.
static int prt_pulse_wait(prt_pulse *p) {
	while (!p->done) pa_threaded_mainloop_wait(p->ml);
	p->done = 0;
	return p->failed ? -1 : 0;
}

static void prt_pulse_close(prt_pulse *p) {
	if (p == NULL) return;
	if (p->ml != NULL) pa_threaded_mainloop_lock(p->ml);
	if (p->st != NULL) {
		pa_stream_set_read_callback(p->st, NULL, NULL);
		pa_stream_set_state_callback(p->st, NULL, NULL);
		pa_stream_disconnect(p->st);
		pa_stream_unref(p->st);
	}
	if (p->ctx != NULL) {
		pa_context_set_state_callback(p->ctx, NULL, NULL);
		pa_context_disconnect(p->ctx);
		pa_context_unref(p->ctx);
	}
	if (p->ml != NULL) {
		pa_threaded_mainloop_unlock(p->ml);
		pa_threaded_mainloop_stop(p->ml); // joins its thread: no callback runs after this
		pa_threaded_mainloop_free(p->ml);
	}
	free(p);
}

// prt_pulse_open connects to server (NULL: the default) and records source (NULL: the
// default) at rate and channels, float32, in fragments of frag_bytes, into cap. On failure
// it returns NULL and a message in err.
static prt_pulse *prt_pulse_open(prt_capture *cap, const char *server, const char *source, int rate, int channels,
		uint32_t frag_bytes, char *err, size_t errlen) {
	prt_pulse *p = calloc(1, sizeof(prt_pulse));
	if (p == NULL) { snprintf(err, errlen, "out of memory"); return NULL; }
	p->cap = cap; p->rate = rate; p->channels = channels;
	if ((p->ml = pa_threaded_mainloop_new()) == NULL) { snprintf(err, errlen, "no main loop"); free(p); return NULL; }
	p->ctx = pa_context_new(pa_threaded_mainloop_get_api(p->ml), "Parley");
	if (p->ctx == NULL) { snprintf(err, errlen, "no context"); prt_pulse_close(p); return NULL; }
	pa_context_set_state_callback(p->ctx, prt_pulse_ctx_cb, p);
	pa_threaded_mainloop_lock(p->ml);
	if (pa_threaded_mainloop_start(p->ml) < 0) {
		pa_threaded_mainloop_unlock(p->ml);
		snprintf(err, errlen, "cannot start the main loop");
		prt_pulse_close(p);
		return NULL;
	}
	if (pa_context_connect(p->ctx, server, PA_CONTEXT_NOAUTOSPAWN, NULL) < 0 || prt_pulse_wait(p) < 0) {
		snprintf(err, errlen, "connecting to the server: %s", pa_strerror(pa_context_errno(p->ctx)));
		pa_threaded_mainloop_unlock(p->ml);
		prt_pulse_close(p);
		return NULL;
	}
	pa_sample_spec ss = {PA_SAMPLE_FLOAT32LE, (uint32_t)rate, (uint8_t)channels};
	p->st = pa_stream_new(p->ctx, "Parley microphone", &ss, NULL);
	if (p->st == NULL) {
		snprintf(err, errlen, "new stream: %s", pa_strerror(pa_context_errno(p->ctx)));
		pa_threaded_mainloop_unlock(p->ml);
		prt_pulse_close(p);
		return NULL;
	}
	pa_stream_set_state_callback(p->st, prt_pulse_stream_cb, p);
	pa_stream_set_read_callback(p->st, prt_pulse_read_cb, p);
	pa_buffer_attr ba = {(uint32_t)-1, (uint32_t)-1, (uint32_t)-1, (uint32_t)-1, frag_bytes};
	if (pa_stream_connect_record(p->st, source, &ba, PA_STREAM_ADJUST_LATENCY) < 0 || prt_pulse_wait(p) < 0) {
		snprintf(err, errlen, "recording: %s", pa_strerror(pa_context_errno(p->ctx)));
		pa_threaded_mainloop_unlock(p->ml);
		prt_pulse_close(p);
		return NULL;
	}
	pa_threaded_mainloop_unlock(p->ml);
	return p;
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/gordonklaus/portaudio"
)

// The Go counters type is read in place from the C callback's memory: the layouts must agree.
var (
	_ [unsafe.Sizeof(counters{}) - C.sizeof_prt_counters]struct{}
	_ [C.sizeof_prt_counters - unsafe.Sizeof(counters{})]struct{}
)

// rtRing is a ring of samples in C memory, shared by a Go goroutine and the C callback (one
// producer and one consumer).
type rtRing struct{ q *C.prt_ring }

// Cap is the number of samples the ring holds.
func (r rtRing) Cap() int { return int(r.q.mask) + 1 }

// Len is the number of samples waiting to be read.
func (r rtRing) Len() int { return int(C.prt_ring_len(r.q)) }

// Free is the number of samples that can be written now.
func (r rtRing) Free() int { return int(C.prt_ring_free(r.q)) }

// Write copies as much of p as fits and returns the count (producer side).
func (r rtRing) Write(p []float32) int {
	return int(C.prt_ring_write(r.q, cfloats(p), C.uint64_t(len(p))))
}

// Read copies up to len(p) samples out and returns the count (consumer side).
func (r rtRing) Read(p []float32) int {
	return int(C.prt_ring_read(r.q, cfloats(p), C.uint64_t(len(p))))
}

// cfloats is p's first sample for C (nil for an empty p, which C then copies none of).
func cfloats(p []float32) *C.float {
	if len(p) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&p[0]))
}

// Discard drops up to n queued samples (consumer side) and returns how many it dropped.
func (r rtRing) Discard(n int) int { return int(C.prt_ring_discard(r.q, C.uint64_t(n))) }

// Written is the total number of samples ever written.
func (r rtRing) Written() uint64 { return (*atomic.Uint64)(unsafe.Pointer(&r.q.w)).Load() }

// Consumed is the total number of samples ever read or discarded.
func (r rtRing) Consumed() uint64 { return (*atomic.Uint64)(unsafe.Pointer(&r.q.r)).Load() }

// waker is the pipe a goroutine sleeps on until the callback has moved audio: the callback
// writes a byte when the goroutine armed its flag.
type waker struct {
	r       *os.File // read end, non-blocking, in Go's poller
	w       int      // write end (non-blocking), shared with the callback
	waiting *uint32  // the flag, in C memory
	want    *uint64  // for a reader: the ring fill it waits for (nil: any callback wakes it)
	buf     [64]byte
}

func newWaker(waiting *C.uint32_t) (*waker, error) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("device: a wake-up pipe: %w", err)
	}
	return &waker{r: os.NewFile(uintptr(fds[0]), "audio-wake"), w: fds[1], waiting: (*uint32)(unsafe.Pointer(waiting))}, nil
}

// arm tells the callback that a goroutine is about to sleep.
func (k *waker) arm() { atomic.StoreUint32(k.waiting, 1) }

// armFor is arm for a reader that wants n samples in the ring before it wakes.
func (k *waker) armFor(n int) {
	atomic.StoreUint64(k.want, uint64(max(1, n)))
	atomic.StoreUint32(k.waiting, 1)
}

// kick wakes the sleeper from Go (close, loss, a cancelled context).
func (k *waker) kick() {
	if k != nil {
		syscall.Write(k.w, []byte{1})
	}
}

// maxSleep bounds one sleep, so that a stream that stops calling back is still noticed.
const maxSleep = 100 * time.Millisecond

// sleep waits, after arm and a last look at the ring, for the callback's byte, ctx or
// maxSleep; it returns ctx's error when ctx ended.
func (k *waker) sleep(ctx context.Context) error {
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, k.kick)
		defer stop()
	}
	k.r.SetReadDeadline(time.Now().Add(maxSleep))
	k.r.Read(k.buf[:])
	return ctx.Err()
}

func (k *waker) close() {
	k.r.Close()
	syscall.Close(k.w)
}

// rtCapture is a Capture's real-time state: its ring, counters and waker, in C memory.
type rtCapture struct {
	c        *C.prt_capture
	ring     rtRing
	wake     *waker
	inStream atomic.Bool // a stream's callback may touch it
}

func newRTCapture(samples, channels int) (*rtCapture, error) {
	c := (*C.prt_capture)(C.calloc(1, C.sizeof_prt_capture))
	if c == nil || C.prt_ring_init(&c.ring, C.uint64_t(samples)) == 0 {
		C.free(unsafe.Pointer(c))
		return nil, errors.New("device: out of memory for the capture ring")
	}
	c.channels = C.int(channels)
	k, err := newWaker(&c.waiting)
	if err != nil {
		C.prt_ring_free_buf(&c.ring)
		C.free(unsafe.Pointer(c))
		return nil, err
	}
	c.wake_fd = C.int(k.w)
	k.want = (*uint64)(unsafe.Pointer(&c.want))
	return &rtCapture{c: c, ring: rtRing{&c.ring}, wake: k}, nil
}

func (r *rtCapture) counters() *counters { return (*counters)(unsafe.Pointer(&r.c.ctr)) }

// callback runs the C callback on a buffer: how tests drive a capture without a device.
func (r *rtCapture) callback(in []float32, adc time.Duration, flags portaudio.StreamCallbackFlags) {
	C.prt_capture_cb(r.c, cfloats(in), C.ulong(len(in)/int(r.c.channels)), C.double(adc.Seconds()), C.PaStreamCallbackFlags(flags))
}

func (r *rtCapture) free() {
	r.wake.close()
	C.prt_ring_free_buf(&r.c.ring)
	C.free(unsafe.Pointer(r.c))
}

// rtPlayback is a Playback's real-time state.
type rtPlayback struct {
	p          *C.prt_playback
	ring, echo rtRing
	space      *waker // the writer: room in the ring, audio handed to the device
	echoWake   *waker
	inStream   atomic.Bool // a stream's callback may touch it
}

func newRTPlayback(samples, echoSamples, channels int) (*rtPlayback, error) {
	p := (*C.prt_playback)(C.calloc(1, C.sizeof_prt_playback))
	if p == nil {
		return nil, errors.New("device: out of memory for the playback ring")
	}
	r := &rtPlayback{p: p}
	fail := func(err error) (*rtPlayback, error) { r.free(); return nil, err }
	if C.prt_ring_init(&p.ring, C.uint64_t(samples)) == 0 {
		return fail(errors.New("device: out of memory for the playback ring"))
	}
	r.ring = rtRing{&p.ring}
	if echoSamples > 0 {
		if C.prt_ring_init(&p.echo, C.uint64_t(echoSamples)) == 0 {
			return fail(errors.New("device: out of memory for the echo ring"))
		}
		p.has_echo = 1
		r.echo = rtRing{&p.echo}
	}
	p.channels = C.int(channels)
	var err error
	if r.space, err = newWaker(&p.space_waiting); err != nil {
		return fail(err)
	}
	p.space_fd = C.int(r.space.w)
	if echoSamples > 0 {
		if r.echoWake, err = newWaker(&p.echo_waiting); err != nil {
			return fail(err)
		}
		p.echo_fd = C.int(r.echoWake.w)
		r.echoWake.want = (*uint64)(unsafe.Pointer(&p.echo_want))
	} else {
		p.echo_fd = -1
	}
	return r, nil
}

// kick wakes the writer and the echo reader.
func (r *rtPlayback) kick() {
	r.space.kick()
	r.echoWake.kick()
}

func (r *rtPlayback) counters() *counters { return (*counters)(unsafe.Pointer(&r.p.ctr)) }

func (r *rtPlayback) hasEcho() bool { return r.p.has_echo != 0 }

func (r *rtPlayback) poison() *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&r.p.poison)) }
func (r *rtPlayback) handed() *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&r.p.handed)) }
func (r *rtPlayback) echoDropped() *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&r.p.echo_dropped))
}
func (r *rtPlayback) streaming() *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&r.p.streaming))
}

// callback runs the C callback on a buffer: how tests drive a playback without a device.
func (r *rtPlayback) callback(out []float32, dac time.Duration, flags portaudio.StreamCallbackFlags) {
	C.prt_playback_cb(r.p, cfloats(out), C.ulong(len(out)/int(r.p.channels)), C.double(dac.Seconds()), C.PaStreamCallbackFlags(flags))
}

func (r *rtPlayback) free() {
	if r.space != nil {
		r.space.close()
	}
	if r.echoWake != nil {
		r.echoWake.close()
	}
	C.prt_ring_free_buf(&r.p.ring)
	C.prt_ring_free_buf(&r.p.echo)
	C.free(unsafe.Pointer(r.p))
}

// rtStream is an open PortAudio stream whose callback is prt_callback.
type rtStream struct {
	s    *C.prt_stream
	capt *rtCapture
	play *rtPlayback
}

// openRT opens a stream over the given halves (either may be nil). Call with pa.mu held.
func openRT(p portaudio.StreamParameters, capt *rtCapture, play *rtPlayback) (*rtStream, error) {
	s := (*C.prt_stream)(C.calloc(1, C.sizeof_prt_stream))
	if s == nil {
		return nil, errors.New("device: out of memory for a stream")
	}
	inDev, inCh, inLat := C.int(-1), C.int(0), C.double(0)
	st := &rtStream{s: s}
	if capt != nil && p.Input.Device != nil {
		s.cap, st.capt = capt.c, capt
		inDev, inCh, inLat = C.int(p.Input.Device.Index), C.int(p.Input.Channels), C.double(p.Input.Latency.Seconds())
	}
	outDev, outCh, outLat := C.int(-1), C.int(0), C.double(0)
	if play != nil && p.Output.Device != nil {
		s.play, st.play = play.p, play
		outDev, outCh, outLat = C.int(p.Output.Device.Index), C.int(p.Output.Channels), C.double(p.Output.Latency.Seconds())
	}
	if err := paErr(C.prt_open(s, inDev, inCh, inLat, outDev, outCh, outLat, C.double(p.SampleRate),
		C.ulong(p.FramesPerBuffer), C.ulong(p.Flags))); err != nil {
		C.free(unsafe.Pointer(s))
		return nil, err
	}
	if st.capt != nil {
		st.capt.inStream.Store(true)
	}
	if st.play != nil {
		st.play.inStream.Store(true)
	}
	return st, nil
}

func paErr(e C.PaError) error {
	if e == C.paNoError {
		return nil
	}
	return errors.New(C.GoString(C.Pa_GetErrorText(e)))
}

// The methods below are safe on a closed stream: they do nothing, or say 0.

func (s *rtStream) Start() error {
	return s.call(func(p unsafe.Pointer) C.PaError { return C.Pa_StartStream(p) })
}
func (s *rtStream) Stop() error {
	return s.call(func(p unsafe.Pointer) C.PaError { return C.Pa_StopStream(p) })
}
func (s *rtStream) Abort() error {
	return s.call(func(p unsafe.Pointer) C.PaError { return C.Pa_AbortStream(p) })
}

func (s *rtStream) call(f func(unsafe.Pointer) C.PaError) error {
	if s.s == nil {
		return ErrClosed
	}
	return paErr(f(s.s.pa))
}

// Time is the stream's clock.
func (s *rtStream) Time() time.Duration {
	if s.s == nil {
		return 0
	}
	return time.Duration(float64(C.Pa_GetStreamTime(s.s.pa)) * 1e9)
}

// OutputLatency is the output latency PortAudio reports for the open stream.
func (s *rtStream) OutputLatency() time.Duration {
	if s.s == nil {
		return 0
	}
	return time.Duration(float64(C.prt_output_latency(s.s.pa)) * 1e9)
}

// Close closes the stream; its callback has run for the last time when it returns.
// A stream that cannot be closed keeps its halves' memory.
func (s *rtStream) Close() error {
	if s.s == nil {
		return nil
	}
	if err := paErr(C.Pa_CloseStream(s.s.pa)); err != nil {
		return err
	}
	C.free(unsafe.Pointer(s.s))
	s.s = nil
	if s.capt != nil {
		s.capt.inStream.Store(false)
	}
	if s.play != nil {
		s.play.inStream.Store(false)
	}
	return nil
}

// freeWhenUnreachable frees a half's C memory once its Go owner is garbage, so that a
// goroutine still in Read or Write after Close never touches freed memory. A half that a
// stream still calls back into is never freed.
func freeWhenUnreachable[T any](owner *T, inStream *atomic.Bool, free func()) {
	runtime.AddCleanup(owner, func(struct{}) {
		if !inStream.Load() {
			free()
		}
	}, struct{}{})
}

// pulseStream is a capture through PulseAudio's own API (prt_pulse_open): libpulse's thread
// runs prt_capture_cb on each fragment, as PortAudio's callback does.
type pulseStream struct {
	p    *C.prt_pulse
	capt *rtCapture
}

// openPulse records the default source (or source) at rate × channels into capt's ring, in
// fragments of frames frames. The server is libpulse's choice (PULSE_SERVER, the user's).
func openPulse(capt *rtCapture, source string, rate, channels, frames int) (*pulseStream, error) {
	var src *C.char
	if source != "" {
		src = C.CString(source)
		defer C.free(unsafe.Pointer(src))
	}
	var msg [256]C.char
	capt.inStream.Store(true) // from the open on, libpulse's thread may call back into it
	p := C.prt_pulse_open(capt.c, nil, src, C.int(rate), C.int(channels), C.uint32_t(frames*channels*4), &msg[0], C.size_t(len(msg)))
	if p == nil {
		capt.inStream.Store(false)
		return nil, fmt.Errorf("pulseaudio: %s", C.GoString(&msg[0]))
	}
	return &pulseStream{p: p, capt: capt}, nil
}

// Time is the clock the capture's StartTime counts in (CLOCK_MONOTONIC).
func (s *pulseStream) Time() time.Duration { return time.Duration(float64(C.prt_mono()) * 1e9) }

// Close disconnects; the read callback has run for the last time when it returns.
func (s *pulseStream) Close() {
	if s.p == nil {
		return
	}
	C.prt_pulse_close(s.p)
	s.p = nil
	s.capt.inStream.Store(false)
}
