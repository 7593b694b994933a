package cli

import (
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spindle-rpc/spindle/services/sys"
)

func newPingCmd(g *globals) *cobra.Command {
	var count int
	var interval time.Duration
	c := &cobra.Command{
		Use:               "ping TARGET",
		ValidArgsFunction: g.completeTarget,
		Short:             "Measure the round-trip time of a call to the target's agent",
		Args:              targetArgs(false),
		RunE: func(c *cobra.Command, args []string) error {
			if count < 1 {
				return &usageError{cmd: c.CommandPath(), err: fmt.Errorf("-c must be at least 1, got %d", count)}
			}
			ctx, _, stop := SignalContext(c.Context())
			defer stop()
			s, err := g.connect(ctx, args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			var rtts []time.Duration
			for i := 0; i < count; i++ {
				if i > 0 && interval > 0 {
					select {
					case <-time.After(interval):
					case <-ctx.Done():
					}
				}
				if ctx.Err() != nil {
					break
				}
				t0 := time.Now()
				if err := sys.Ping(ctx, s.cx); err != nil {
					if ctx.Err() != nil && len(rtts) > 0 {
						break
					}
					return err
				}
				rtt := time.Since(t0)
				rtts = append(rtts, rtt)
				fmt.Fprintf(g.stdout, "%s: seq=%d time=%s\n", s.cx.Name(), i+1, fmtDuration(rtt))
			}
			if len(rtts) > 1 {
				min, med, max := stats(rtts)
				fmt.Fprintf(g.stdout, "%d calls: min/median/max = %s/%s/%s\n", len(rtts), fmtDuration(min), fmtDuration(med), fmtDuration(max))
			}
			return nil
		},
	}
	c.Flags().IntVarP(&count, "count", "c", 1, "number of calls")
	// No -i shorthand: -i is the global ssh identity flag, like ssh -i.
	c.Flags().DurationVar(&interval, "interval", 0, "pause between calls")
	return c
}

// stats returns the minimum, median and maximum of ds (not empty).
func stats(ds []time.Duration) (min, median, max time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[0], medianSorted(s), s[len(s)-1]
}

func medianSorted[T int64 | float64 | time.Duration](s []T) T {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// fmtDuration prints d in µs with one decimal below 10 ms, else rounded.
func fmtDuration(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
	}
	return d.Round(100 * time.Microsecond).String()
}
