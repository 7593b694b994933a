// Package version holds the build's version strings, shared by the
// controller and the agent so that each can check the other.
package version

// Version is the release version; `make build` overrides it with
// -ldflags "-X github.com/spindle-rpc/spindle/version.Version=...".
var Version = "0.1.0-dev"
