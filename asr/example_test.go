package asr_test

import (
	"context"
	"fmt"
	"os"

	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio"
)

// Transcribe a WAV file of any layout with a SenseVoice model directory, streaming it.
func Example() {
	rec, err := asr.New("testdata/sensevoice/tiny", asr.Config{Options: asr.Options{Language: "auto", ITN: true}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rec.Close()
	f, err := os.Open("speech.wav")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	wav, err := audio.NewWAVReader(f)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := rec.TranscribeSource(context.Background(), wav, rec.Options(), func(s asr.Segment) error {
		fmt.Printf("[%.2f–%.2f] %s\n", s.Start, s.End, s.Text)
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text, res.Lang, res.Emotion, res.Event)
	for _, w := range res.Words() {
		fmt.Printf("%s %.2f %.2f\n", w.Word, w.Start, w.End)
	}
}
