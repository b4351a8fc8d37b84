// Package version carries the build's version and commit, set at link time:
//
//	go build -ldflags "-X github.com/ironlink/ironlink/internal/version.Version=v1.2.3 \
//	  -X github.com/ironlink/ironlink/internal/version.Commit=$(git rev-parse HEAD)"
//
// `make build` and the Containerfiles do that. A plain `go build` in a git
// checkout still knows its commit from the Go toolchain's build info.
package version

import "runtime/debug"

// Version is the ironlink version (git describe); "dev" for unstamped builds.
var Version = "dev"

// Commit is the git commit the binary was built from; "" when not stamped
// (then String falls back to the toolchain's vcs.revision).
var Commit = ""

// String returns "VERSION (commit COMMIT)", the commit marked "-dirty"
// when the toolchain recorded uncommitted changes, or just VERSION when the
// commit is unknown.
func String() string {
	commit, dirty := Commit, false
	if info, ok := debug.ReadBuildInfo(); ok && commit == "" {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if commit == "" {
		return Version
	}
	if dirty {
		commit += "-dirty"
	}
	return Version + " (commit " + commit + ")"
}
