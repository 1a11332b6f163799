package audio

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// MaxWAVSamples bounds ReadWAV: 128 Mi samples (512 MiB of float32; 2.3 h of 16 kHz mono,
// 23 min of 48 kHz stereo). Use NewWAVReader to stream longer files in bounded memory.
const MaxWAVSamples = 128 << 20

// WAV format tags.
const (
	wavPCM        = 0x0001
	wavFloat      = 0x0003
	wavALaw       = 0x0006
	wavMuLaw      = 0x0007
	wavExtensible = 0xFFFE
)

// the KSDATAFORMAT_SUBTYPE GUID tail shared by PCM and IEEE float
var wavGUIDTail = []byte{0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71}

const (
	wavUnknownSize = 0xFFFFFFFF
	wavStreamSize  = 0x7FFFF000 // data sizes from here up mean "until the end of the stream"
)

// WAVInfo describes a WAV stream.
type WAVInfo struct {
	Format
	SampleFormat  SampleFormat
	ValidBits     int    // significant bits per sample (≤ container bits)
	ChannelMask   uint32 // speaker positions from WAVE_FORMAT_EXTENSIBLE, 0 if none
	Extensible    bool   // the fmt chunk was WAVE_FORMAT_EXTENSIBLE
	Frames        int64  // frames in the data chunk; -1 when the header says "unknown" (a stream)
	DataOffset    int64  // byte offset of the first sample
	SkippedChunks []string
}

// WAVReader streams samples from a WAV file with a fixed-size buffer. It implements Source.
type WAVReader struct {
	r         io.Reader
	info      WAVInfo
	block     int   // bytes per frame
	remaining int64 // bytes left in the data chunk; -1 when unknown
	buf       []byte
	err       error // sticky terminal error (io.EOF when done)
	noSize    bool  // the header's data size was 0: read to the end of the input
	read      int64 // bytes of samples read
	warning   error // damage worked around (Warning)
}

const wavReadBuf = 32 << 10

// NewWAVReader parses the header of r up to the first sample. Chunks it does not need are
// skipped (with Seek when r is an io.Seeker). Errors wrap ErrFormat, ErrUnsupported or
// ErrTruncated and say what was wrong.
func NewWAVReader(r io.Reader) (*WAVReader, error) {
	var hdr [12]byte
	if n, err := io.ReadFull(r, hdr[:]); err != nil {
		if n == 0 {
			return nil, fmt.Errorf("%w: empty input, not a WAV file", ErrFormat)
		}
		return nil, fmt.Errorf("%w: %d bytes is too short for a WAV header", ErrTruncated, n)
	}
	switch string(hdr[0:4]) {
	case "RIFF":
	case "RF64", "BW64":
		return nil, fmt.Errorf("%w: %s (64-bit WAV) files", ErrUnsupported, hdr[0:4])
	case "RIFX":
		return nil, fmt.Errorf("%w: big-endian RIFX WAV files", ErrUnsupported)
	default:
		return nil, fmt.Errorf("%w: not a WAV file (starts with %q, want \"RIFF\")", ErrFormat, hdr[0:4])
	}
	if string(hdr[8:12]) != "WAVE" {
		return nil, fmt.Errorf("%w: RIFF file of type %q, not WAVE", ErrFormat, hdr[8:12])
	}
	w := &WAVReader{r: r, info: WAVInfo{Frames: -1}}
	off := int64(12)
	haveFmt := false
	for {
		var ch [8]byte
		n, err := io.ReadFull(r, ch[:])
		if err != nil {
			if n == 0 {
				if haveFmt {
					return nil, fmt.Errorf("%w: WAV file has no data chunk", ErrFormat)
				}
				return nil, fmt.Errorf("%w: WAV file has no fmt chunk", ErrFormat)
			}
			return nil, fmt.Errorf("%w: chunk header at byte %d cut short", ErrTruncated, off)
		}
		off += 8
		id := string(ch[0:4])
		size := int64(binary.LittleEndian.Uint32(ch[4:8]))
		switch id {
		case "fmt ":
			if haveFmt {
				return nil, fmt.Errorf("%w: second fmt chunk at byte %d", ErrFormat, off-8)
			}
			if size < 16 || size > 1024 {
				return nil, fmt.Errorf("%w: fmt chunk of %d bytes (want 16..1024)", ErrFormat, size)
			}
			body := make([]byte, size)
			if _, err := io.ReadFull(r, body); err != nil {
				return nil, fmt.Errorf("%w: fmt chunk claims %d bytes but the file ends first", ErrTruncated, size)
			}
			off += size
			if size&1 == 1 {
				// pad byte; if it is missing the search for the data chunk reports it
				var pad [1]byte
				if _, err := io.ReadFull(r, pad[:]); err == nil {
					off++
				}
			}
			if err := w.parseFmt(body); err != nil {
				return nil, err
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return nil, fmt.Errorf("%w: data chunk before fmt chunk", ErrFormat)
			}
			w.info.DataOffset = off
			switch {
			case size >= wavStreamSize:
				// sizes written by tools streaming to a pipe (0xFFFFFFFF by ffmpeg, 0x7FFFF000 by
				// sox and espeak-ng): read to the end of the input
				w.remaining = -1
			case size == 0:
				// a recorder stopped before it went back to write the sizes leaves 0 here; what
				// follows is the recording (sox and ffmpeg read it too). Warning says so.
				w.remaining = -1
				w.noSize = true
			default:
				w.remaining = size / int64(w.block) * int64(w.block)
				w.info.Frames = size / int64(w.block)
			}
			w.buf = make([]byte, wavReadBuf/w.block*w.block+w.block)
			return w, nil
		default:
			if !printable(ch[0:4]) {
				return nil, fmt.Errorf("%w: garbage chunk id %q at byte %d", ErrFormat, ch[0:4], off-8)
			}
			skip := size + size&1
			if err := skipBytes(r, skip); err != nil {
				return nil, fmt.Errorf("%w: chunk %q at byte %d claims %d bytes but the file ends first", ErrTruncated, id, off-8, size)
			}
			off += skip
			w.info.SkippedChunks = append(w.info.SkippedChunks, id)
			if len(w.info.SkippedChunks) > 1000 {
				return nil, fmt.Errorf("%w: more than 1000 chunks before the audio data", ErrFormat)
			}
		}
	}
}

func printable(id []byte) bool {
	for _, c := range id {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

func skipBytes(r io.Reader, n int64) error {
	if n == 0 {
		return nil
	}
	if s, ok := r.(io.Seeker); ok {
		cur, err := s.Seek(0, io.SeekCurrent)
		if err == nil {
			end, err := s.Seek(0, io.SeekEnd)
			if err == nil {
				if cur+n > end {
					return io.ErrUnexpectedEOF
				}
				_, err = s.Seek(cur+n, io.SeekStart)
				return err
			}
		}
	}
	m, err := io.CopyN(io.Discard, r, n)
	if m < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

func (w *WAVReader) parseFmt(b []byte) error {
	le := binary.LittleEndian
	tag := le.Uint16(b[0:])
	ch := int(le.Uint16(b[2:]))
	rate := int64(le.Uint32(b[4:]))
	align := int(le.Uint16(b[12:]))
	bits := int(le.Uint16(b[14:]))
	w.info.ValidBits = bits
	if tag == wavExtensible {
		if len(b) < 40 || le.Uint16(b[16:]) < 22 {
			return fmt.Errorf("%w: WAVE_FORMAT_EXTENSIBLE fmt chunk of %d bytes (want 40)", ErrFormat, len(b))
		}
		w.info.Extensible = true
		w.info.ValidBits = int(le.Uint16(b[18:]))
		w.info.ChannelMask = le.Uint32(b[20:])
		if !bytes.Equal(b[26:40], wavGUIDTail) {
			return fmt.Errorf("%w: WAVE_FORMAT_EXTENSIBLE sub-format GUID %x", ErrUnsupported, b[24:40])
		}
		tag = le.Uint16(b[24:])
		if w.info.ValidBits == 0 {
			w.info.ValidBits = bits
		}
		if w.info.ValidBits > bits {
			return fmt.Errorf("%w: %d valid bits in a %d-bit container", ErrFormat, w.info.ValidBits, bits)
		}
	}
	if ch < 1 || ch > MaxChannels {
		return fmt.Errorf("%w: %d channels (want 1..%d)", ErrFormat, ch, MaxChannels)
	}
	if rate < 1 || rate > MaxSampleRate {
		return fmt.Errorf("%w: sample rate %d Hz (want 1..%d)", ErrFormat, rate, MaxSampleRate)
	}
	var sf SampleFormat
	switch tag {
	case wavPCM:
		switch bits {
		case 8:
			sf = U8
		case 16:
			sf = S16
		case 24:
			sf = S24
		case 32:
			sf = S32
		default:
			return fmt.Errorf("%w: %d-bit integer PCM (want 8, 16, 24 or 32)", ErrUnsupported, bits)
		}
	case wavFloat:
		switch bits {
		case 32:
			sf = F32
		case 64:
			sf = F64
		default:
			return fmt.Errorf("%w: %d-bit float PCM (want 32 or 64)", ErrUnsupported, bits)
		}
	case wavALaw, wavMuLaw:
		if bits != 8 {
			return fmt.Errorf("%w: %d-bit G.711 (A-law/µ-law) samples (want 8)", ErrUnsupported, bits)
		}
		sf = MuLaw
		if tag == wavALaw {
			sf = ALaw
		}
	default:
		return fmt.Errorf("%w: WAV format tag 0x%04x (want PCM or IEEE float)", ErrUnsupported, tag)
	}
	if want := ch * sf.Size(); align != want {
		return fmt.Errorf("%w: block align %d, but %d channels of %d bits need %d", ErrFormat, align, ch, bits, want)
	}
	w.block = align
	w.info.Format = Format{SampleRate: int(rate), Channels: ch}
	w.info.SampleFormat = sf
	return nil
}

// Info describes the stream.
func (w *WAVReader) Info() WAVInfo { return w.info }

// Warning reports damage that reading worked around, once the data has been read to its
// end: a data chunk cut short (the samples that were there are returned), or a header whose
// data size is 0 with audio after it (read to the end of the file). It wraps ErrRecovered,
// and ErrTruncated for a file cut short; nil for a sound file.
func (w *WAVReader) Warning() error { return w.warning }

// seconds formats a byte count of samples as a duration.
func (w *WAVReader) seconds(bytes int64) string {
	return fmt.Sprintf("%.2f s", float64(bytes/int64(w.block))/float64(w.info.SampleRate))
}

// Format implements Source.
func (w *WAVReader) Format() Format { return w.info.Format }

// Read implements Source. A data chunk that ends before its declared size returns the samples
// that were there together with an error wrapping ErrTruncated.
func (w *WAVReader) Read(ctx context.Context, p []float32) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ch := w.info.Channels
	n, err := frameLen(p, ch)
	if err != nil {
		return 0, err
	}
	want := n / ch * w.block
	if want > len(w.buf) {
		want = len(w.buf) / w.block * w.block
	}
	if w.remaining >= 0 && int64(want) > w.remaining {
		want = int(w.remaining)
	}
	if want == 0 {
		w.err = io.EOF
		return 0, io.EOF
	}
	got, rerr := io.ReadFull(w.r, w.buf[:want])
	got = got / w.block * w.block
	DecodePCM(p[:got/w.block*ch], w.buf[:got], w.info.SampleFormat)
	if w.remaining >= 0 {
		w.remaining -= int64(got)
	}
	w.read += int64(got)
	out := got / w.block * ch
	switch {
	case rerr == nil:
		return out, nil
	case rerr == io.EOF || rerr == io.ErrUnexpectedEOF:
		// The end of the input is the end of the audio: for a stream of unknown length that is
		// normal; a file cut short gives what is there, with a warning.
		switch {
		case w.noSize && w.read > 0:
			w.warning = fmt.Errorf("%w: the WAV header says the recording is empty (data size 0), "+
				"but %s of audio follow; read to the end of the file (was the recorder stopped "+
				"before it finished the file?)", ErrRecovered, w.seconds(w.read))
		case w.remaining > 0:
			w.warning = fmt.Errorf("%w: %w: the WAV header promises %s of audio but the file ends "+
				"after %s; read what is there (was the file cut short?)", ErrRecovered, ErrTruncated,
				w.seconds(w.info.Frames*int64(w.block)), w.seconds(w.read))
		}
		w.err = io.EOF
		if out > 0 {
			return out, nil
		}
		return 0, io.EOF
	default:
		w.err = fmt.Errorf("audio: reading WAV data: %w", rerr)
		return out, w.err
	}
}

// ReadWAV reads a whole WAV stream into memory, refusing streams of more than MaxWAVSamples.
// A damaged file that could be read as far as it goes (see WAVReader.Warning) returns its
// samples together with that warning, an error wrapping ErrRecovered.
func ReadWAV(r io.Reader) (*Buffer, error) { return DecodeWAV(r, MaxWAVSamples) }

// DecodeWAV is ReadWAV with a caller-chosen limit on the number of samples (all channels).
func DecodeWAV(r io.Reader, maxSamples int) (*Buffer, error) {
	wr, err := NewWAVReader(r)
	if err != nil {
		return nil, err
	}
	info := wr.Info()
	if info.Frames >= 0 && maxSamples > 0 && info.Frames*int64(info.Channels) > int64(maxSamples) {
		return nil, fmt.Errorf("%w: WAV data of %d frames × %d channels is over the limit of %d samples (stream it with NewWAVReader)",
			ErrTooLarge, info.Frames, info.Channels, maxSamples)
	}
	b, err := ReadAll(context.Background(), wr, maxSamples)
	if err != nil {
		return nil, err
	}
	return b, wr.Warning()
}

// ReadWAVFile reads a WAV file; errors name the file.
func ReadWAVFile(path string) (*Buffer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := ReadWAV(f)
	if err != nil {
		return b, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// WAVHeader returns a canonical header for dataBytes bytes of samples; dataBytes < 0 writes
// the "unknown length" sizes (0xFFFFFFFF) used when streaming. More than two channels use
// WAVE_FORMAT_EXTENSIBLE.
func WAVHeader(f Format, sf SampleFormat, dataBytes int64) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if sf.Size() == 0 {
		return nil, fmt.Errorf("%w: sample format %v", ErrUnsupported, sf)
	}
	ext := f.Channels > 2
	// G.711 is not PCM: its fmt chunk carries cbSize and a fact chunk the frame count, as
	// the RIFF spec asks of every compressed format (strict readers refuse the file without)
	g711 := sf == MuLaw || sf == ALaw
	fmtSize := 16
	switch {
	case ext:
		fmtSize = 40
	case g711:
		fmtSize = 18
	}
	factSize := 0
	if g711 {
		factSize = 12
	}
	hlen := 12 + 8 + fmtSize + factSize + 8
	riff, data := uint32(wavUnknownSize), uint32(wavUnknownSize)
	if dataBytes >= 0 {
		total := int64(hlen-8) + dataBytes + dataBytes&1
		if total > 0xFFFFFFFE {
			return nil, fmt.Errorf("%w: %d bytes of samples do not fit a WAV file (4 GiB limit)", ErrTooLarge, dataBytes)
		}
		riff, data = uint32(total), uint32(dataBytes)
	}
	h := make([]byte, 0, hlen)
	le := binary.LittleEndian
	h = append(h, "RIFF"...)
	h = le.AppendUint32(h, riff)
	h = append(h, "WAVEfmt "...)
	h = le.AppendUint32(h, uint32(fmtSize))
	tag := uint16(wavPCM)
	switch {
	case sf.Float():
		tag = wavFloat
	case sf == MuLaw:
		tag = wavMuLaw
	case sf == ALaw:
		tag = wavALaw
	}
	sub := tag
	if ext {
		tag = wavExtensible
	}
	align := f.Channels * sf.Size()
	h = le.AppendUint16(h, tag)
	h = le.AppendUint16(h, uint16(f.Channels))
	h = le.AppendUint32(h, uint32(f.SampleRate))
	h = le.AppendUint32(h, uint32(f.SampleRate*align))
	h = le.AppendUint16(h, uint16(align))
	h = le.AppendUint16(h, uint16(sf.Size()*8))
	switch {
	case ext:
		h = le.AppendUint16(h, 22)
		h = le.AppendUint16(h, uint16(sf.Size()*8))
		h = le.AppendUint32(h, 0) // no speaker positions claimed
		h = le.AppendUint16(h, sub)
		h = append(h, wavGUIDTail...)
	case g711:
		h = le.AppendUint16(h, 0) // cbSize: nothing more
	}
	if g711 {
		frames := uint32(wavUnknownSize)
		if dataBytes >= 0 {
			frames = uint32(dataBytes / int64(align))
		}
		h = append(h, "fact"...)
		h = le.AppendUint32(h, 4)
		h = le.AppendUint32(h, frames)
	}
	h = append(h, "data"...)
	h = le.AppendUint32(h, data)
	return h, nil
}

// WriteWAV writes b as a complete WAV file with samples stored as sf.
func WriteWAV(w io.Writer, b *Buffer, sf SampleFormat) error {
	if err := b.Format.Validate(); err != nil {
		return err
	}
	if len(b.Data)%b.Channels != 0 {
		return fmt.Errorf("%w: %d samples is not a whole number of %d-channel frames", ErrFormat, len(b.Data), b.Channels)
	}
	n := int64(len(b.Data)) * int64(sf.Size())
	h, err := WAVHeader(b.Format, sf, n)
	if err != nil {
		return err
	}
	if _, err := w.Write(h); err != nil {
		return err
	}
	const chunk = 8192
	buf := make([]byte, 0, chunk*sf.Size()+1)
	for i := 0; i < len(b.Data); i += chunk {
		j := min(i+chunk, len(b.Data))
		buf = EncodePCM(buf[:0], b.Data[i:j], sf)
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	if n&1 == 1 {
		_, err = w.Write([]byte{0})
	}
	return err
}

// WriteWAVFile writes b to path as 16-bit PCM unless sf says otherwise.
func WriteWAVFile(path string, b *Buffer, sf SampleFormat) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteWAV(f, b, sf); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// WAVWriter streams samples into a WAV file. It implements Sink. When the destination is an
// io.WriteSeeker, Close fills in the real sizes; otherwise the header says "unknown length"
// (0xFFFFFFFF), which ffmpeg, sox and this package's reader accept for streams.
type WAVWriter struct {
	w      io.Writer
	f      Format
	sf     SampleFormat
	n      int64
	buf    []byte
	closed bool
}

// NewWAVWriter writes the header and returns the writer.
func NewWAVWriter(w io.Writer, f Format, sf SampleFormat) (*WAVWriter, error) {
	h, err := WAVHeader(f, sf, -1)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(h); err != nil {
		return nil, err
	}
	return &WAVWriter{w: w, f: f, sf: sf}, nil
}

// Format implements Sink.
func (w *WAVWriter) Format() Format { return w.f }

// Write implements Sink.
func (w *WAVWriter) Write(ctx context.Context, p []float32) (int, error) {
	if w.closed {
		return 0, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if len(p)%w.f.Channels != 0 {
		return 0, fmt.Errorf("%w: %d samples is not a whole number of %d-channel frames", ErrFormat, len(p), w.f.Channels)
	}
	w.buf = EncodePCM(w.buf[:0], p, w.sf)
	m, err := w.w.Write(w.buf)
	w.n += int64(m)
	if err != nil {
		return m / w.sf.Size(), err
	}
	return len(p), nil
}

// Close, on a seekable destination, pads the data chunk and writes the final sizes. It does
// not close the destination.
func (w *WAVWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	// A stream of unknown length gets no pad byte: a reader could not tell it from a sample.
	s, ok := w.w.(io.WriteSeeker)
	if !ok {
		return nil
	}
	end, err := s.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil // not really seekable (a pipe): keep the streaming header
	}
	if w.n&1 == 1 {
		if _, err := w.w.Write([]byte{0}); err != nil {
			return err
		}
		end++
	}
	h, err := WAVHeader(w.f, w.sf, w.n)
	if err != nil {
		return err
	}
	if _, err := s.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := s.Write(h); err != nil {
		return err
	}
	_, err = s.Seek(end, io.SeekStart)
	return err
}
