package factory

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/tts/chattts/convert"
)

// ChatTTS's official release is safetensors; Parley runs its ONNX export set. These turn one
// into the other in Go (tts/chattts/convert) for `parley models pull chattts`, `parley models
// import DIR` and the Models page's Download.

// ChatTTS and ChatTTSRelease are the registry ids of the voice Parley runs and of the
// upstream release it is converted from.
const ChatTTS, ChatTTSRelease = "chattts", "chattts-release"

// PullChatTTS downloads the official release (ChatTTSRelease, pinned) and converts it into
// the ChatTTS voice; it returns the installed directory.
func PullChatTTS(ctx context.Context, mgr *assets.Manager, log *slog.Logger) (string, error) {
	if err := mgr.Pull(ctx, ChatTTSRelease); err != nil {
		return "", err
	}
	dir, err := mgr.ModelDir(ChatTTSRelease)
	if err != nil {
		return "", err
	}
	return ConvertChatTTS(ctx, mgr, filepath.Join(dir, "asset"), filepath.Join(dir, "ChatTTS", "config", "config.py"), nil, log)
}

// ConvertChatTTS converts a release's asset directory (with the speaker statistics in
// spkStat, the graphs of tpl: nil for the official size's) into the ChatTTS voice, written
// beside the models and installed whole (a failure leaves the previous one); it returns the
// installed directory.
func ConvertChatTTS(ctx context.Context, mgr *assets.Manager, assetDir, spkStat string, tpl fs.FS, log *slog.Logger) (string, error) {
	if err := os.MkdirAll(mgr.Dir(), 0o755); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(mgr.Dir(), ".chattts-convert-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	out := filepath.Join(work, ChatTTS)
	if _, err := convert.Convert(ctx, convert.Options{Assets: assetDir, SpkStat: spkStat, Template: tpl, Log: log}, out); err != nil {
		return "", err
	}
	if _, err := mgr.Import(ctx, out, ChatTTS); err != nil {
		return "", err
	}
	return mgr.ModelDir(ChatTTS)
}
