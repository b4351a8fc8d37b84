package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ironlink/ironlink/hub/novatemplate"
	"github.com/ironlink/ironlink/internal/filewatch"
)

// hubNovaTemplates is the --nova-templates-file held and reloaded.
type hubNovaTemplates struct {
	held *filewatch.Held[novatemplate.File] // nil without the flag
}

// newNovaTemplates loads --nova-templates-file (an invalid file fails the
// start; none: no templates, a NOVA_CREATE naming one is refused).
func newNovaTemplates(cfg Config, log *slog.Logger) (*hubNovaTemplates, error) {
	t := &hubNovaTemplates{}
	if cfg.NovaTemplatesFile == "" {
		return t, nil
	}
	tlog := log.With("component", "novatemplate")
	held, err := filewatch.Load(filewatch.HeldOptions[novatemplate.File]{
		Path: cfg.NovaTemplatesFile, What: "nova templates", Log: tlog, Parse: novatemplate.Parse,
		Applied: func(_, f *novatemplate.File) {
			tlog.Info("nova templates reloaded", "path", cfg.NovaTemplatesFile, "templates", len(f.Templates))
		},
	})
	if err != nil {
		return nil, fmt.Errorf("nova templates: %w", err)
	}
	tlog.Info("nova templates loaded", "path", cfg.NovaTemplatesFile, "templates", len(held.Current().Templates))
	t.held = held
	return t, nil
}

// current is the file in force (nil without the flag).
func (t *hubNovaTemplates) current() *novatemplate.File {
	if t == nil || t.held == nil {
		return nil
	}
	return t.held.Current()
}

// run watches the file until ctx ends.
func (t *hubNovaTemplates) run(ctx context.Context) error {
	if t.held == nil {
		return nil
	}
	return t.held.Run(ctx)
}
