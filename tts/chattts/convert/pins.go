package convert

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// UpstreamCommit is the 2noise/ChatTTS commit the pins below come from.
const UpstreamCommit = "1092c1ffcaa82f4bdef104c35aa5541227c3e1d7"

// Pinned are the sha256 of the release files the official template was made for, as upstream
// publishes them in ChatTTS/res/sha256_map.json, and of ChatTTS/config/config.py (the speaker
// statistics), all at UpstreamCommit; paths are relative to a checkout with asset/ beside
// ChatTTS/ (the registry's chattts-release pins the same values).
var Pinned = map[string]string{
	"asset/Decoder.safetensors":               "77aa55e0a977949c4733df3c6f876fa85860d3298cba63295a7bc6901729d4e0",
	"asset/DVAE.safetensors":                  "1d0b044a8368c0513100a2eca98456b289e6be6a18b7a63be1bcaa315ea874d9",
	"asset/Embed.safetensors":                 "2ff0be7134934155741b643b74e32fb6bf3eec41257984459b2ed60cdb4c48b0",
	"asset/Vocos.safetensors":                 "07e5561491cce41f7f90cfdb94b2ff263ff5742c3d89339db99b17ad82cc3f44",
	"asset/gpt/config.json":                   "0aaa1ecd96c49ad4f473459eb1982fa7ad79fa5de08cde2781bf6ad1f9a0c236",
	"asset/gpt/model.safetensors":             "cd0806fd971f52f6a22c923ec64982b305e817bcc41ca83417fcf9141b984a0f",
	"asset/tokenizer/special_tokens_map.json": "bd0ac9d9bb1657996b5c5fbcaa7d80f8de530d01a283da97f89deae5b1b8d011",
	"asset/tokenizer/tokenizer_config.json":   "43e9d658b554fa5ee8d8e1d763349323bfef1ed7a89c0794220ab8861387d421",
	"asset/tokenizer/tokenizer.json":          "843838a64e121e23e774cc75874c6fe862198d9f7dd43747914633a8fd89c20e",
	"ChatTTS/config/config.py":                "5532a88976fc4caa2d2c7913e528306527daa4e08a13793133acea9d4c21360d",
}

// Unpinned lists the release files under assets (an asset directory) that Convert reads and
// whose content differs from the pinned release, as "path (sha256 …)": such a release may
// still convert (its shapes are checked), but it is not the one the template was made for.
func Unpinned(assets string) ([]string, error) {
	var out []string
	for _, rel := range ReleaseFiles {
		want := Pinned["asset/"+rel]
		got, err := fileSHA256(filepath.Join(assets, filepath.FromSlash(rel)))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRelease, err)
		}
		if got != want {
			out = append(out, fmt.Sprintf("%s (sha256 %s…, the release has %s…)", rel, got[:12], want[:12]))
		}
	}
	return out, nil
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// FindSpkStat looks for ChatTTS/config/config.py beside or above a release's asset directory
// (a ChatTTS checkout with the assets downloaded into it, or the registry's chattts-release).
func FindSpkStat(assets string) (string, bool) {
	for _, d := range []string{filepath.Dir(assets), assets, filepath.Dir(filepath.Dir(assets))} {
		p := filepath.Join(d, "ChatTTS", "config", "config.py")
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}
