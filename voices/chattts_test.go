package voices

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestChatTTSSpeakerGolden decodes a speaker string made by Python's lzma (as ChatTTS makes
// them) and Debian's base16384 tool (train/tts/chattts_speaker_fixture.py).
func TestChatTTSSpeakerGolden(t *testing.T) {
	text, err := os.ReadFile("testdata/chattts_speaker.txt")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/chattts_speaker.f16")
	if err != nil {
		t.Fatal(err)
	}
	if !IsChatTTSSpeaker(string(text)) {
		t.Fatal("not recognised as a ChatTTS speaker string")
	}
	got, err := DecodeChatTTSSpeaker(string(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 768 {
		t.Fatalf("%d values, want 768", len(got))
	}
	for i := range got {
		if want := fromHalf(binary.LittleEndian.Uint16(raw[2*i:])); got[i] != want {
			t.Fatalf("value %d = %v, want %v", i, got[i], want)
		}
	}
	// our encoder's output decodes to the same values (and so would load in ChatTTS)
	enc, err := EncodeChatTTSSpeaker(got)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeChatTTSSpeaker(enc)
	if err != nil || len(back) != 768 || back[100] != got[100] {
		t.Fatalf("re-encode: %v", err)
	}
	// and a chattts voice file may carry it
	v := New("chat", "chattts", KindEmbedding)
	v.Embedding = &Embedding{Dim: 768, Speaker: strings.TrimSpace(string(text))}
	b, err := v.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
}

func TestBase16384(t *testing.T) {
	// "hello w" and "hello wo" as Debian's base16384 tool encodes them
	for in, want := range map[string]string{"hello w": "\u6819\u64c6\u7fbc\u6e77", "hello wo": "\u6819\u64c6\u7fbc\u6e77\u69c0\u3d01", "": ""} {
		if got := encodeB14([]byte(in)); got != want {
			t.Errorf("encodeB14(%q) = %+q, want %+q", in, got, want)
		}
		if got, err := decodeB14(want); err != nil || string(got) != in {
			t.Errorf("decodeB14(%+q) = %q, %v", want, got, err)
		}
	}
	for n := 0; n < 30; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*37 + n)
		}
		if got, err := decodeB14(encodeB14(b)); err != nil || !bytes.Equal(got, b) {
			t.Errorf("round trip of %d bytes: %v", n, err)
		}
	}
	for _, bad := range []string{"abc", "\u6819\u3d01\u3d01", "\u6819\u64c6\u3d05", "\u9fff"} {
		if _, err := decodeB14(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("decodeB14(%+q) = %v", bad, err)
		}
	}
}

func FuzzDecodeChatTTSSpeaker(f *testing.F) {
	if b, err := os.ReadFile("testdata/chattts_speaker.txt"); err == nil {
		f.Add(string(b))
	}
	f.Add("\u6819\u64c6\u7fbc\u6e77\u69c0\u3d01")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := DecodeChatTTSSpeaker(s)
		if err != nil {
			return
		}
		if len(v) == 0 || len(v) > MaxSpeakerFloat {
			t.Fatalf("%d values accepted", len(v))
		}
	})
}
