package app

import (
	"context"
	"fmt"
	"log/slog"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/hub/hwprofile"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/validation"
	"github.com/ironlink/ironlink/internal/filewatch"
)

// hubProfiles is the hardware profiles file held and reloaded, and the
// runner that keeps HardwareMatchesProfile up to date.
type hubProfiles struct {
	held   *filewatch.Held[hwprofile.File] // nil without --hardware-profiles-file
	runner *hwprofile.Runner
	// validation decides the open validation runs (hub/validation).
	validation *validation.Runner
	// current is the profiles file in force (nil: none).
	current func() *hwprofile.File
}

// validationCleanSteps are the validation clean steps of the profile that
// applies to a device (operations.Config.ValidationCleanSteps).
func (p *hubProfiles) validationCleanSteps(site, name, resourceClass string) []*ironlinkv1.CleanStep {
	return p.current().ValidationCleanSteps(hwprofile.Device{Site: site, Name: name, ResourceClass: resourceClass})
}

// newProfiles loads --hardware-profiles-file (an invalid file fails the
// start; none: no profile, no HardwareMatchesProfile) and gives the
// profiles to fleet.
func newProfiles(cfg Config, st *store.Store, fleetSrv *fleet.Server, log *slog.Logger) (*hubProfiles, error) {
	plog := log.With("component", "hwprofile")
	p := &hubProfiles{}
	current := func() *hwprofile.File { return nil }
	if cfg.HardwareProfilesFile != "" {
		held, err := filewatch.Load(filewatch.HeldOptions[hwprofile.File]{
			Path: cfg.HardwareProfilesFile, What: "hardware profiles", Log: plog, Parse: hwprofile.Parse,
			Applied: func(_, f *hwprofile.File) {
				plog.Info("hardware profiles reloaded", "path", cfg.HardwareProfilesFile, "profiles", len(f.Profiles))
				if p.runner != nil {
					p.runner.Reloaded()
				}
			},
		})
		if err != nil {
			return nil, fmt.Errorf("hardware profiles: %w", err)
		}
		p.held, current = held, held.Current
		plog.Info("hardware profiles loaded", "path", cfg.HardwareProfilesFile, "profiles", len(held.Current().Profiles))
	}
	p.runner = hwprofile.NewRunner(st, current, 0, plog)
	p.validation = validation.NewRunner(st, current, log.With("component", "validation"))
	p.validation.Timeout = cfg.ValidationTimeout
	fleetSrv.SetHardwareProfiles(current)
	p.current = current
	return p, nil
}

// run watches the file and runs the check until ctx ends.
func (p *hubProfiles) run(ctx context.Context) error {
	if p.held != nil {
		go func() { _ = p.held.Run(ctx) }()
	}
	go func() { _ = p.validation.Run(ctx) }()
	return p.runner.Run(ctx)
}
