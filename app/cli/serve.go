package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/serve"
)

func init() {
	register(&command{
		name:  "serve",
		usage: "serve  headless speech server: OpenAI-compatible API, realtime WebSocket, Wyoming (same as --serve)",
		run:   runServe,
	})
}

const serveUsage = `usage: parley serve [flags]   (or parley --serve)

Runs Parley headless as a speech server:
  HTTP (serve.addr, default %s)
    POST /v1/audio/transcriptions   OpenAI-compatible speech to text (multipart)
    POST /v1/audio/speech           OpenAI-compatible text to speech (wav, pcm, flac; mp3, opus, aac through ffmpeg; streamed)
    POST /v1/chat/completions       chat through the configured LLM (offline skills without one)
    GET  /v1/models                 ASR models, voices and LLMs
    GET  /v1/realtime               realtime voice over WebSocket (OpenAI Realtime events)
    GET  /health, /metrics          health and Prometheus metrics
  Wyoming (Home Assistant) on serve.wyoming_asr_addr (10300) and serve.wyoming_tts_addr (10200);
  set either to "off" to disable it.
Listening beyond loopback needs serve.api_key (clients send Authorization: Bearer KEY) or
serve.allow_unauthenticated = true. Settings: "parley config keys" lists the serve.* keys.`

func runServe(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "serve", fmt.Sprintf(serveUsage, config.Default().Serve.Addr))
	addr := fs.String("addr", "", "HTTP listen address (overrides serve.addr)")
	cert := fs.String("tls-cert", "", "PEM certificate file: serve HTTPS and wss:// (with -tls-key)")
	key := fs.String("tls-key", "", "PEM private key file for -tls-cert")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("serve", "unexpected arguments %q", fs.Args())
	}
	cfg := env.Config.Serve
	if *addr != "" {
		cfg.Addr = *addr
	}
	if *cert != "" || *key != "" {
		cfg.TLSCert, cfg.TLSKey = *cert, *key
	}
	loaded, err := serve.LoadFrom(ctx, env.factory())
	if err != nil {
		return err
	}
	defer loaded.Close()
	for _, n := range loaded.Notes {
		env.Log.Info("note", "what", n.Message)
	}
	barge, err := app.ParseBargeIn(env.Config.Assistant.BargeIn)
	if err != nil {
		return err
	}
	srv, err := serve.New(serve.Options{Config: cfg, Engines: loaded.Engines, Log: env.Log, Version: release(),
		TLSCertFile: cfg.TLSCert, TLSKeyFile: cfg.TLSKey,
		BargeIn: barge, BargeInMin: time.Duration(env.Config.Assistant.BargeInMinSec * float64(time.Second))})
	if err != nil {
		return err
	}
	if err := srv.Run(ctx); err != nil {
		return err
	}
	env.Log.Info("stopped")
	return nil
}
