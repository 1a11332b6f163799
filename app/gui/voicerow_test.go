package gui

import "testing"

func TestVoiceRowNamesTheRunningVoice(t *testing.T) {
	if got := voiceRow("chattts-demo, seed 7"); got != "Voice (chattts-demo, seed 7)" {
		t.Errorf("voiceRow = %q", got)
	}
	if got := voiceRow(""); got != "Voice (none running)" {
		t.Errorf("voiceRow(\"\") = %q", got)
	}
	if got := voiceDevice("espeak-ng, seed 7", "GPU 0 (H100, via cuda)", "cuda"); got != "CPU" {
		t.Errorf("espeak-ng runs on %q", got)
	}
	if got := voiceDevice("chattts-demo", "GPU 0 (H100, via cuda)", "cuda"); got != "GPU 0 (H100, via cuda) — runtime.provider = cuda" {
		t.Errorf("the ChatTTS voice runs on %q", got)
	}
	if got := voiceSuffix("anna (chattts-demo)"); got != " · voice anna (chattts-demo)" {
		t.Errorf("bubble header suffix %q", got)
	}
}
