package ansible

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// Plugin is the connection plugin, as kept in the repository
// (plugin/spindle.py): SPINDLE_VERSION "dev", SPINDLE_PATH "".
//
//go:embed plugin/spindle.py
var Plugin []byte

// PluginFile is the plugin's file name: Ansible names a connection plugin
// after its file.
const PluginFile = "spindle.py"

var (
	versionLine = regexp.MustCompile(`(?m)^SPINDLE_VERSION = .*$`)
	pathLine    = regexp.MustCompile(`(?m)^SPINDLE_PATH = .*$`)
)

// Stamp returns the plugin with its SPINDLE_VERSION and SPINDLE_PATH
// lines set: the version it must find in the daemon, and the spindle
// binary it starts the daemon with.
func Stamp(version, binaryPath string) ([]byte, error) {
	if len(versionLine.FindAll(Plugin, -1)) != 1 || len(pathLine.FindAll(Plugin, -1)) != 1 {
		return nil, fmt.Errorf("the embedded plugin lacks its SPINDLE_VERSION or SPINDLE_PATH line (or has several)")
	}
	// A JSON string is a Python string literal too.
	v, _ := json.Marshal(version)
	p, _ := json.Marshal(binaryPath)
	out := versionLine.ReplaceAllLiteral(Plugin, append([]byte("SPINDLE_VERSION = "), v...))
	return pathLine.ReplaceAllLiteral(out, append([]byte("SPINDLE_PATH = "), p...)), nil
}

// Install writes the stamped plugin into dir (made if missing), replacing
// the file atomically, and returns the file's path.
func Install(dir, version, binaryPath string) (string, error) {
	b, err := Stamp(version, binaryPath)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, PluginFile)
	tmp, err := os.CreateTemp(dir, ".spindle-*.py")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", err
	}
	return dst, nil
}
