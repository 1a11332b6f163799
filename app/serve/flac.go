package serve

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/parley-voice/parley/audio"
)

// flacBlock is the number of samples per FLAC frame.
const flacBlock = 4096

// FLACWriter encodes mono 16-bit PCM as a streamable FLAC file: a STREAMINFO header with the
// total length unknown (so it can be written before the audio exists), then one frame per
// flacBlock samples, each with a constant, fixed-predictor (orders 0–4, Rice-coded residual)
// or verbatim subframe, whichever is smallest.
type FLACWriter struct {
	w      io.Writer
	rate   int
	buf    []int32
	s16    []byte // samples being written, as 16-bit PCM
	frame  uint64
	header bool
	bw     bitWriter
}

// NewFLACWriter returns an encoder for mono 16-bit audio at rate Hz.
func NewFLACWriter(w io.Writer, rate int) (*FLACWriter, error) {
	if rate <= 0 || rate > 655350 {
		return nil, fmt.Errorf("flac: sample rate %d", rate)
	}
	return &FLACWriter{w: w, rate: rate}, nil
}

func (f *FLACWriter) writeHeader() error {
	f.header = true
	var b []byte
	b = append(b, "fLaC"...)
	b = append(b, 0x80, 0, 0, 34) // last metadata block, STREAMINFO, length 34
	b = binary.BigEndian.AppendUint16(b, 16)
	b = binary.BigEndian.AppendUint16(b, flacBlock)
	b = append(b, 0, 0, 0, 0, 0, 0) // min/max frame size unknown
	// 20 bits rate, 3 bits channels-1, 5 bits bps-1, 36 bits total samples (0 = unknown)
	v := uint64(f.rate)<<44 | uint64(0)<<41 | uint64(15)<<36
	b = binary.BigEndian.AppendUint64(b, v)
	b = append(b, make([]byte, 16)...) // MD5 unknown
	_, err := f.w.Write(b)
	return err
}

// Write encodes samples (float32 in [-1, 1]); whole frames are written as they fill.
func (f *FLACWriter) Write(samples []float32) error {
	if !f.header {
		if err := f.writeHeader(); err != nil {
			return err
		}
	}
	// quantized as every 16-bit output is (audio.EncodePCM), so FLAC, WAV and pcm agree
	f.s16 = audio.EncodePCM(f.s16[:0], samples, audio.S16)
	for i := 0; i < len(f.s16); i += 2 {
		f.buf = append(f.buf, int32(int16(binary.LittleEndian.Uint16(f.s16[i:]))))
		if len(f.buf) == flacBlock {
			if err := f.flushFrame(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close writes the last partial frame (and the header, for empty audio).
func (f *FLACWriter) Close() error {
	if !f.header {
		if err := f.writeHeader(); err != nil {
			return err
		}
	}
	if len(f.buf) > 0 {
		return f.flushFrame()
	}
	return nil
}

func (f *FLACWriter) flushFrame() error {
	x := f.buf
	n := len(x)
	bw := &f.bw
	bw.reset()
	// frame header
	bw.write(0xFFF8, 16) // sync, reserved, fixed block size
	bw.write(7, 4)       // block size: 16-bit (n-1) at the end of the header
	bw.write(0, 4)       // sample rate: from STREAMINFO
	bw.write(0, 4)       // mono
	bw.write(4, 3)       // 16 bits per sample
	bw.write(0, 1)
	writeUTF8(bw, f.frame)
	bw.write(uint64(n-1), 16)
	bw.align()
	bw.buf = append(bw.buf, crc8(bw.buf))
	// subframe
	encodeSubframe(bw, x)
	bw.align()
	crc := crc16(bw.buf)
	bw.buf = binary.BigEndian.AppendUint16(bw.buf, crc)
	f.frame++
	f.buf = f.buf[:0]
	_, err := f.w.Write(bw.buf)
	return err
}

func encodeSubframe(bw *bitWriter, x []int32) {
	constant := true
	for _, v := range x[1:] {
		if v != x[0] {
			constant = false
			break
		}
	}
	if constant {
		bw.write(0, 1)
		bw.write(0, 6)
		bw.write(0, 1)
		bw.write(uint64(uint32(x[0]))&0xFFFF, 16)
		return
	}
	n := len(x)
	bestOrder, bestBits := -1, uint64(16*n)
	var bestK int
	res := make([]int32, n)
	for order := 0; order <= 4 && order < n; order++ {
		residual(x, order, res)
		k, bits := riceParam(res[order:])
		total := uint64(order*16) + 6 + bits
		if total < bestBits {
			bestOrder, bestBits, bestK = order, total, k
		}
	}
	if bestOrder < 0 {
		bw.write(0, 1)
		bw.write(1, 6) // verbatim
		bw.write(0, 1)
		for _, v := range x {
			bw.write(uint64(uint32(v))&0xFFFF, 16)
		}
		return
	}
	residual(x, bestOrder, res)
	bw.write(0, 1)
	bw.write(uint64(8|bestOrder), 6) // fixed predictor
	bw.write(0, 1)
	for _, v := range x[:bestOrder] {
		bw.write(uint64(uint32(v))&0xFFFF, 16)
	}
	bw.write(0, 2) // Rice, 4-bit parameters
	bw.write(0, 4) // partition order 0
	bw.write(uint64(bestK), 4)
	for _, r := range res[bestOrder:] {
		u := uint64(uint32((r << 1) ^ (r >> 31)))
		q := u >> uint(bestK)
		for q >= 32 {
			bw.write(0, 32)
			q -= 32
		}
		bw.write(1, int(q)+1)
		if bestK > 0 {
			bw.write(u&(1<<uint(bestK)-1), bestK)
		}
	}
}

// residual fills res[order:] with the fixed predictor's error.
func residual(x []int32, order int, res []int32) {
	for i := order; i < len(x); i++ {
		var p int32
		switch order {
		case 1:
			p = x[i-1]
		case 2:
			p = 2*x[i-1] - x[i-2]
		case 3:
			p = 3*x[i-1] - 3*x[i-2] + x[i-3]
		case 4:
			p = 4*x[i-1] - 6*x[i-2] + 4*x[i-3] - x[i-4]
		}
		res[i] = x[i] - p
	}
}

// riceParam picks the Rice parameter (0..14) that codes res in the fewest bits.
func riceParam(res []int32) (int, uint64) {
	var sum uint64
	for _, r := range res {
		sum += uint64(uint32((r << 1) ^ (r >> 31)))
	}
	bestK, best := 0, ^uint64(0)
	n := uint64(len(res))
	for k := 0; k <= 14; k++ {
		bits := n*(uint64(k)+1) + sum>>uint(k) // approximate: quotient bits ≈ Σu/2^k
		if bits < best {
			bestK, best = k, bits
		}
	}
	// exact count for the chosen parameter
	var exact uint64
	for _, r := range res {
		u := uint64(uint32((r << 1) ^ (r >> 31)))
		exact += u>>uint(bestK) + 1 + uint64(bestK)
	}
	return bestK, exact
}

func writeUTF8(bw *bitWriter, v uint64) {
	switch {
	case v < 0x80:
		bw.write(v, 8)
	case v < 0x800:
		bw.write(0xC0|v>>6, 8)
		bw.write(0x80|v&0x3F, 8)
	case v < 0x10000:
		bw.write(0xE0|v>>12, 8)
		bw.write(0x80|(v>>6)&0x3F, 8)
		bw.write(0x80|v&0x3F, 8)
	case v < 0x200000:
		bw.write(0xF0|v>>18, 8)
		bw.write(0x80|(v>>12)&0x3F, 8)
		bw.write(0x80|(v>>6)&0x3F, 8)
		bw.write(0x80|v&0x3F, 8)
	case v < 0x4000000:
		bw.write(0xF8|v>>24, 8)
		for s := 18; s >= 0; s -= 6 {
			bw.write(0x80|(v>>uint(s))&0x3F, 8)
		}
	default:
		bw.write(0xFC|(v>>30)&1, 8)
		for s := 24; s >= 0; s -= 6 {
			bw.write(0x80|(v>>uint(s))&0x3F, 8)
		}
	}
}

// bitWriter packs bits MSB first.
type bitWriter struct {
	buf  []byte
	acc  uint64
	nacc int
}

func (b *bitWriter) reset() { b.buf, b.acc, b.nacc = b.buf[:0], 0, 0 }

func (b *bitWriter) write(v uint64, n int) {
	for n > 0 {
		take := min(n, 56-b.nacc)
		shift := n - take
		b.acc = b.acc<<uint(take) | (v>>uint(shift))&(1<<uint(take)-1)
		b.nacc += take
		n = shift
		for b.nacc >= 8 {
			b.buf = append(b.buf, byte(b.acc>>uint(b.nacc-8)))
			b.nacc -= 8
		}
	}
}

func (b *bitWriter) align() {
	if b.nacc > 0 {
		b.write(0, 8-b.nacc)
	}
}

func crc8(p []byte) byte {
	var c byte
	for _, b := range p {
		c ^= b
		for i := 0; i < 8; i++ {
			if c&0x80 != 0 {
				c = c<<1 ^ 0x07
			} else {
				c <<= 1
			}
		}
	}
	return c
}

func crc16(p []byte) uint16 {
	var c uint16
	for _, b := range p {
		c ^= uint16(b) << 8
		for i := 0; i < 8; i++ {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x8005
			} else {
				c <<= 1
			}
		}
	}
	return c
}
