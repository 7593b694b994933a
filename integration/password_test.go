package integration_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/ssh"
)

// typist answers password prompts from a script and records them.
type typist struct {
	mu      sync.Mutex
	answers []string
	prompts []string
}

func (ty *typist) prompt(p string) (string, error) {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	ty.prompts = append(ty.prompts, p)
	if len(ty.answers) == 0 {
		return "", errors.New("the script has no more answers")
	}
	a := ty.answers[0]
	ty.answers = ty.answers[1:]
	return a, nil
}

func (ty *typist) asked() []string {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	return append([]string(nil), ty.prompts...)
}

// passwordOpts are tg's options with no key: the password typed is all.
func passwordOpts(tg *target, ty *typist) ssh.Options {
	o := tg.opts()
	o.IdentityFiles = nil
	o.PasswordPrompt = ty.prompt
	return o
}

// A mistyped password is asked again, as ssh asks it: "Permission denied,
// please try again.", up to NumberOfPasswordPrompts (3) in all; then the
// connection fails as an auth failure, naming the limit.
func TestSSHPasswordRetry(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, "/bin/sh")
	check := func(t *testing.T, ty *typist, n int) {
		t.Helper()
		p := ty.asked()
		if len(p) != n {
			t.Fatalf("%d prompts, want %d: %q", len(p), n, p)
		}
		for i, q := range p {
			if again := strings.HasPrefix(q, "Permission denied, please try again.\n"); again != (i > 0) || !strings.HasSuffix(q, "'s password: ") {
				t.Errorf("prompt %d: %q", i, q)
			}
		}
	}
	t.Run("third time lucky", func(t *testing.T) {
		ty := &typist{answers: []string{"typo1", "typo2", tg.u.Password}}
		_, cx := mustConnect(t, tg, passwordOpts(tg, ty))
		run(t, cx, "true")
		check(t, ty, 3)
	})
	t.Run("three refusals", func(t *testing.T) {
		ty := &typist{answers: []string{"typo1", "typo2", "typo3", tg.u.Password}}
		_, _, err := connect(t, nil, passwordOpts(tg, ty))
		if !errors.Is(err, spindle.ErrAuth) || !strings.Contains(err.Error(), "NumberOfPasswordPrompts") {
			t.Fatalf("after three wrong passwords: %v", err)
		}
		if strings.Contains(err.Error(), "typo") {
			t.Errorf("a typed password in the error: %v", err)
		}
		check(t, ty, 3)
	})
	t.Run("NumberOfPasswordPrompts 1", func(t *testing.T) {
		ty := &typist{answers: []string{"typo1", tg.u.Password}}
		o := passwordOpts(tg, ty)
		o.Host, o.Port, o.User, o.ConfigFile = "pw", 0, "", tg.sshConfig(t, "pw", "  NumberOfPasswordPrompts 1\n  PubkeyAuthentication no\n")
		_, _, err := connect(t, nil, o)
		if !errors.Is(err, spindle.ErrAuth) {
			t.Fatalf("one wrong password, one prompt allowed: %v", err)
		}
		check(t, ty, 1)
	})
	t.Run("hop through an agent", func(t *testing.T) {
		first := newTarget(t, "/bin/sh")
		ctx, cx := throughFirst(t, first)
		ty := &typist{answers: []string{"typo1", tg.u.Password}}
		hop, err := cx.Connect(ctx, passwordOpts(tg, ty))
		if err != nil {
			t.Fatalf("hop with the second password typed: %v", err)
		}
		run(t, hop, "true")
		check(t, ty, 2)
	})
	t.Run("a given password is not retried", func(t *testing.T) {
		o := tg.opts()
		o.IdentityFiles, o.Password = nil, "not-"+tg.u.Password
		before := strings.Count(tg.s.Log(), "Failed password for "+tg.u.Name)
		if _, _, err := connect(t, nil, o); !errors.Is(err, spindle.ErrAuth) {
			t.Fatalf("wrong given password: %v", err)
		}
		if n := strings.Count(tg.s.Log(), "Failed password for "+tg.u.Name) - before; n != 1 {
			t.Errorf("sshd saw %d attempts with the given password, want 1", n)
		}
	})
}
