package cli

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/tts/chattts/convert"
)

// ChatTTS's official release is safetensors; Parley runs its ONNX export set. These turn one into
// the other in Go (tts/chattts/convert), for `parley models pull chattts` (the registry's
// chattts-release, downloaded and pinned) and `parley models import DIR` of a release already
// on disk (a ChatTTS checkout with its asset/ directory).

const chatttsID, chatttsReleaseID = factory.ChatTTS, factory.ChatTTSRelease

// pullChatTTS downloads the official release and converts it into the chattts voice.
func pullChatTTS(ctx context.Context, env *cliEnv, mgr *assets.Manager) error {
	fmt.Fprintln(env.Stderr, "after the download the release is converted (about a minute; 1.4 GB written) …")
	t0 := time.Now()
	dir, err := factory.PullChatTTS(ctx, mgr, env.Log)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s: converted in %s and installed in %s; it is the default voice now (tts.engine auto) (`parley models rm %s` frees the release's space)\n",
		chatttsID, time.Since(t0).Round(time.Second), dir, chatttsReleaseID)
	return nil
}

// importChatTTSRelease converts a release found on disk: its files are checked against the
// pinned release (a different one still converts when its shapes fit, with a warning).
func importChatTTSRelease(ctx context.Context, env *cliEnv, mgr *assets.Manager, src, assetDir, spkStat, template string) error {
	if spkStat == "" {
		var ok bool
		if spkStat, ok = convert.FindSpkStat(assetDir); !ok {
			return fmt.Errorf("%s is a ChatTTS release, but its speaker statistics are not beside it: they are in "+
				"ChatTTS/config/config.py of the ChatTTS source (github.com/2noise/ChatTTS at %s); give it with --spk-stat FILE, "+
				"or run `parley models pull chattts`", src, convert.UpstreamCommit[:7])
		}
	}
	var tpl fs.FS
	if template != "" {
		tpl = os.DirFS(template)
	} else { // the pins are the official release's
		odd, err := convert.Unpinned(assetDir)
		if err != nil {
			return err
		}
		if len(odd) > 0 {
			fmt.Fprintf(env.Stderr, "warning: %d file(s) in %s are not the pinned release's (2noise/ChatTTS %s): %s; converting, with every tensor's shape checked\n",
				len(odd), src, convert.UpstreamCommit[:7], strings.Join(odd, ", "))
		}
	}
	return convertChatTTS(ctx, env, mgr, assetDir, spkStat, tpl, "")
}

func convertChatTTS(ctx context.Context, env *cliEnv, mgr *assets.Manager, assetDir, spkStat string, tpl fs.FS, after string) error {
	fmt.Fprintf(env.Stderr, "converting the ChatTTS release in %s (about a minute; 1.4 GB written) …\n", assetDir)
	t0 := time.Now()
	dir, err := factory.ConvertChatTTS(ctx, mgr, assetDir, spkStat, tpl, env.Log)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s: converted in %s and installed in %s; it is the default voice now (tts.engine auto) %s\n",
		chatttsID, time.Since(t0).Round(time.Second), dir, after)
	return nil
}
