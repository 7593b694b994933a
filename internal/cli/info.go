package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle/services/sys"
)

// infoJSON is `spindle info --json`'s output.
type infoJSON struct {
	Context      string   `json:"context"`
	OS           string   `json:"os"`
	Arch         string   `json:"arch"`
	Kernel       string   `json:"kernel"`
	Hostname     string   `json:"hostname"`
	UID          int      `json:"uid"`
	GID          int      `json:"gid"`
	PID          int      `json:"pid"`
	User         string   `json:"user"`
	Home         string   `json:"home"`
	AgentVersion string   `json:"agent_version"`
	Pythons      []string `json:"pythons"`
}

func newInfoJSON(name string, h *sys.HostInfo) infoJSON {
	py := h.Pythons
	if py == nil {
		py = []string{}
	}
	return infoJSON{Context: name, OS: h.OS, Arch: h.Arch, Kernel: h.Kernel, Hostname: h.Hostname,
		UID: h.UID, GID: h.GID, PID: h.PID, User: h.User, Home: h.Home, AgentVersion: h.AgentVersion, Pythons: py}
}

func newInfoCmd(g *globals) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:               "info TARGET",
		ValidArgsFunction: g.completeTarget,
		Short:             "Show facts about the target: OS, kernel, user, agent, Pythons",
		Args:              targetArgs(false),
		RunE: func(c *cobra.Command, args []string) error {
			ctx, _, stop := SignalContext(c.Context())
			defer stop()
			s, err := g.connect(ctx, args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			h, err := sys.Info(ctx, s.cx)
			if err != nil {
				return err
			}
			info := newInfoJSON(s.cx.Name(), h)
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			py := strings.Join(info.Pythons, ", ")
			if py == "" {
				py = "(none)"
			}
			for _, row := range [][2]string{
				{"context", info.Context},
				{"hostname", info.Hostname},
				{"os/arch", info.OS + "/" + info.Arch},
				{"kernel", info.Kernel},
				{"user", fmt.Sprintf("%s (uid %d, gid %d)", info.User, info.UID, info.GID)},
				{"home", info.Home},
				{"agent", info.AgentVersion + ", pid " + strconv.Itoa(info.PID)},
				{"pythons", py},
			} {
				fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return c
}
