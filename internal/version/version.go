// Package version carries the build's version string, set at link time with
// -ldflags "-X github.com/ironlink/ironlink/internal/version.Version=v1.2.3".
package version

// Version is the ironlink version; "dev" for untagged builds.
var Version = "dev"
