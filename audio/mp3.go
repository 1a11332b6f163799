package audio

import (
	"bytes"
	"encoding/binary"
)

// MP3 priming. Every MP3 decoder's output starts 529 samples late (the synthesis filter bank's
// delay), and LAME, the encoder nearly every tool uses, adds 576 more. A LAME/Xing "Info"
// header records the encoder's delay and ffmpeg removes both; a file without one (sox's, or
// any MP3 encoded to a pipe) comes out of ffmpeg 1105 samples late: 69 ms at 16 kHz, 25 ms
// at 44.1 kHz, and every timestamp with it.
const (
	mp3DecoderDelay = 529
	mp3LAMEDelay    = 576
)

// mp3Priming inspects the start of an MP3 file (up to its first audio frame) and returns the
// sample rate of the stream and how many samples at that rate ffmpeg will leave in front of
// the audio. ok is false when head is not MP3. gapless reports that the file carries the
// encoder's delay in a form ffmpeg reads (LAME, Lavf or Lavc Info/Xing tag), so nothing
// remains to trim.
func mp3Priming(head []byte) (rate, extra int, ok bool) {
	b := head
	// ID3v2 tags come first: "ID3", version, flags, then a 28-bit syncsafe size.
	for len(b) >= 10 && string(b[:3]) == "ID3" {
		size := int(b[6]&0x7f)<<21 | int(b[7]&0x7f)<<14 | int(b[8]&0x7f)<<7 | int(b[9]&0x7f)
		if b[5]&0x10 != 0 {
			size += 10 // footer
		}
		if 10+size > len(b) {
			return 0, 0, false
		}
		b = b[10+size:]
	}
	// The first frame: some files have junk (or zero padding) before it; look a little way.
	for i := 0; i+4 <= len(b) && i < 4096; i++ {
		h, ok := parseMP3Header(b[i:])
		if !ok {
			continue
		}
		// A real frame is followed by another (or the end of what we have).
		if next := i + h.size; next+4 <= len(b) {
			if _, ok := parseMP3Header(b[next:]); !ok {
				continue
			}
		}
		return h.rate, mp3Extra(b[i:], h), true
	}
	return 0, 0, false
}

type mp3Header struct {
	mpeg1   bool
	mono    bool
	crc     bool
	rate    int
	size    int // frame length in bytes
	samples int // per frame
}

var (
	mp3Rates   = [3][3]int{{44100, 48000, 32000}, {22050, 24000, 16000}, {11025, 12000, 8000}}
	mp3Kbps1   = [16]int{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0}
	mp3Kbps2   = [16]int{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0}
	gaplessIDs = [][]byte{[]byte("LAME"), []byte("Lavf"), []byte("Lavc")}
)

// parseMP3Header reads a Layer III frame header.
func parseMP3Header(b []byte) (mp3Header, bool) {
	if len(b) < 4 || b[0] != 0xff || b[1]&0xe0 != 0xe0 {
		return mp3Header{}, false
	}
	version := (b[1] >> 3) & 3 // 0: MPEG 2.5, 2: MPEG 2, 3: MPEG 1
	layer := (b[1] >> 1) & 3   // 1: Layer III
	bitrate := int(b[2] >> 4)
	rateIdx := int(b[2]>>2) & 3
	if version == 1 || layer != 1 || bitrate == 0 || bitrate == 15 || rateIdx == 3 {
		return mp3Header{}, false
	}
	h := mp3Header{mpeg1: version == 3, mono: b[3]>>6 == 3, crc: b[1]&1 == 0}
	row := map[byte]int{3: 0, 2: 1, 0: 2}[version]
	h.rate = mp3Rates[row][rateIdx]
	pad := int(b[2]>>1) & 1
	if h.mpeg1 {
		h.samples = 1152
		h.size = 144*mp3Kbps1[bitrate]*1000/h.rate + pad
	} else {
		h.samples = 576
		h.size = 72*mp3Kbps2[bitrate]*1000/h.rate + pad
	}
	return h, h.size > 4
}

// mp3Extra returns the samples ffmpeg leaves in front of the audio of a stream whose first
// frame starts at b.
func mp3Extra(b []byte, h mp3Header) int {
	side := 17 // side information after the header
	switch {
	case h.mpeg1 && h.mono:
		side = 17
	case h.mpeg1:
		side = 32
	case h.mono:
		side = 9
	}
	off := 4 + side
	if h.crc {
		off += 2
	}
	frame := b[:min(len(b), h.size)]
	if off+8 <= len(frame) && (string(frame[off:off+4]) == "Xing" || string(frame[off:off+4]) == "Info") {
		flags := binary.BigEndian.Uint32(frame[off+4:])
		p := off + 8
		for bit, n := range []int{4, 4, 100, 4} { // frames, bytes, TOC, quality
			if flags&(1<<bit) != 0 {
				p += n
			}
		}
		// The encoder's short version string, then 12 bits of delay, 12 of padding.
		if p+24 <= len(frame) {
			for _, id := range gaplessIDs {
				if bytes.HasPrefix(frame[p:], id) {
					return 0 // ffmpeg trims it
				}
			}
		}
		return mp3DecoderDelay + mp3LAMEDelay
	}
	// Fraunhofer's VBRI header, 32 bytes after the frame header, states its delay.
	if v := 4 + 32; v+8 <= len(frame) && string(frame[v:v+4]) == "VBRI" {
		return mp3DecoderDelay + int(binary.BigEndian.Uint16(frame[v+6:]))
	}
	return mp3DecoderDelay + mp3LAMEDelay
}
