package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/ansible"
	"github.com/spindle-rpc/spindle/daemon"
	"github.com/spindle-rpc/spindle/version"
	"go.uber.org/zap"
)

// serveAnsible runs the daemon with the Ansible endpoint (daemon
// --ansible).
func serveAnsible(g *globals, o daemon.Options) error {
	if o.Ready != nil {
		// Two plugins that found no daemon start one each: the one that
		// finds the other serving is as good as started.
		o.Ready = busyIsOK{o.Ready}
	}
	if path := os.Getenv(cpuProfileEnv); path != "" {
		stop, err := startCPUProfile(path)
		if err != nil {
			return err
		}
		defer stop()
	}
	reg := daemon.NewRegistry()
	defer reg.Close()
	ep := &ansible.Endpoint{
		Registry: reg,
		NewController: func() (*spindle.Controller, *zap.Logger) {
			l := g.logger()
			return spindle.NewController(g.controllerOptions(l)), l
		},
		Log: o.Log,
	}
	return daemon.NewServer(o).Serve(ep)
}

// cpuProfileEnv names a file the Ansible daemon writes its CPU profile
// to when it stops: the plugin's per-call cost is the daemon's under
// Ansible's own workers, which start it, so a flag could not reach it.
const cpuProfileEnv = "SPINDLE_DAEMON_CPUPROFILE"

// startCPUProfile profiles the process into path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// busyIsOK tells the daemon's starter "ok" when another daemon serves the
// socket already.
type busyIsOK struct{ io.WriteCloser }

func (b busyIsOK) Write(p []byte) (int, error) {
	if string(bytes.TrimSpace(p)) == "busy" {
		if _, err := b.WriteCloser.Write([]byte("ok\n")); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return b.WriteCloser.Write(p)
}

// ansibleDefaultPlugins are Ansible's own connection plugin directories
// (DEFAULT_CONNECTION_PLUGIN_PATH), which setting
// ANSIBLE_CONNECTION_PLUGINS replaces.
var ansibleDefaultPlugins = []string{"~/.ansible/plugins/connection", "/usr/share/ansible/plugins/connection"}

func newAnsibleCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "ansible",
		Short: "Install Spindle's Ansible connection plugin",
		Long: `Spindle's Ansible connection plugin runs playbooks unchanged, through a
spindle daemon that keeps one connection (and one sudo) per host open
between tasks and runs. 'spindle ansible install' puts it where Ansible
finds it; then ansible_connection=spindle in an inventory, -c spindle, or
ANSIBLE_CONNECTION=spindle is all that changes.`,
	}
	c.AddCommand(newAnsibleInstallCmd(g), newAnsibleEnvCmd(g))
	return c
}

// pluginDir is --path, else the user's connection plugin directory,
// which Ansible searches by default.
func pluginDir(path string) (string, error) {
	if path != "" {
		return filepath.Abs(path)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory to install into (%v): give --path DIR", err)
	}
	return filepath.Join(home, ".ansible", "plugins", "connection"), nil
}

// selfPath is this spindle binary, which the plugin starts the daemon
// with.
func selfPath() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	return exe, nil
}

func newAnsibleInstallCmd(g *globals) *cobra.Command {
	var path string
	c := &cobra.Command{
		Use:   "install [--path DIR]",
		Short: "Install the connection plugin for this user (or into DIR)",
		Long: `Write the connection plugin (spindle.py), stamped with this spindle's
version and path, into ~/.ansible/plugins/connection (where Ansible looks
for this user's connection plugins), or into DIR: a project's
connection_plugins/ directory, or a collection's plugins/connection/.
Run it again after upgrading spindle.`,
		Example: `  spindle ansible install
  spindle ansible install --path ./connection_plugins`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			dir, err := pluginDir(path)
			if err != nil {
				return err
			}
			exe, err := selfPath()
			if err != nil {
				return err
			}
			file, err := ansible.Install(dir, version.Version, exe)
			if err != nil {
				return fmt.Errorf("install the Ansible plugin: %w", err)
			}
			fmt.Fprintf(g.stdout, "Installed %s (spindle %s, %s).\n", file, version.Version, exe)
			fmt.Fprint(g.stdout, usageHint(dir, path == ""))
			return nil
		},
	}
	c.Flags().StringVar(&path, "path", "", "install into this directory instead of ~/.ansible/plugins/connection")
	return c
}

// usageHint says how to use the installed plugin.
func usageHint(dir string, userDefault bool) string {
	var b strings.Builder
	if !userDefault {
		fmt.Fprintf(&b, "Ansible finds it there if the directory is a playbook's connection_plugins/, or with:\n  export ANSIBLE_CONNECTION_PLUGINS=%s\n(spindle ansible env --path %s prints the lines.)\n", pluginsPath(dir), dir)
	}
	b.WriteString(`Use it with any of:
  ansible_connection=spindle      (inventory, per host or group)
  ansible-playbook -c spindle ...
  export ANSIBLE_CONNECTION=spindle
Inventories keep their ssh variables (ansible_host, ansible_user, ansible_port,
ansible_ssh_private_key_file, ansible_password, ansible_ssh_common_args, become_*);
ansible_spindle_via=bastion reaches a host through others.
`)
	return b.String()
}

// pluginsPath is ANSIBLE_CONNECTION_PLUGINS with dir first, then the
// directories Ansible would search without the variable (or the ones it
// names already).
func pluginsPath(dir string) string {
	rest := ansibleDefaultPlugins
	if cur := os.Getenv("ANSIBLE_CONNECTION_PLUGINS"); cur != "" {
		rest = filepath.SplitList(cur)
	}
	parts := []string{dir}
	for _, p := range rest {
		if p != "" && p != dir {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, string(os.PathListSeparator))
}

func newAnsibleEnvCmd(g *globals) *cobra.Command {
	var path string
	c := &cobra.Command{
		Use:   "env [--path DIR]",
		Short: "Print the shell lines that make Ansible find (and use) the plugin",
		Example: `  eval "$(spindle ansible env)"
  spindle ansible env --path ./connection_plugins >> .envrc`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			dir, err := pluginDir(path)
			if err != nil {
				return err
			}
			if _, err := os.Stat(filepath.Join(dir, ansible.PluginFile)); err != nil {
				fmt.Fprintf(g.stdout, "# %s is not installed yet: run spindle ansible install%s\n", filepath.Join(dir, ansible.PluginFile), pathFlag(path, dir))
			}
			fmt.Fprintf(g.stdout, "export ANSIBLE_CONNECTION_PLUGINS=%s\n", shellQuote(pluginsPath(dir)))
			fmt.Fprintln(g.stdout, "# Every play on Spindle (else: ansible_connection=spindle, or -c spindle):")
			fmt.Fprintln(g.stdout, "# export ANSIBLE_CONNECTION=spindle")
			return nil
		},
	}
	c.Flags().StringVar(&path, "path", "", "the directory the plugin is installed in (default ~/.ansible/plugins/connection)")
	return c
}

func pathFlag(path, dir string) string {
	if path == "" {
		return ""
	}
	return " --path " + shellQuote(dir)
}

// shellQuote quotes s for a POSIX shell when it needs it; a leading ~
// is left for the shell to expand.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:~=,+@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
