package ansible

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spindle-rpc/spindle/connectors/become"
	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/hostvars"
	"github.com/spindle-rpc/spindle/rpc"
)

// remote is err as it arrives from an agent: its kind and text, not its
// Go values; wrapped in the chain as the context names it.
func remote(chain string, err error) error {
	return &errkind.Error{Chain: chain, Err: rpc.ToRemote(err)}
}

// The kinds each failure becomes: the become connectors' errors as they
// cross the wire from the host's agent (sudo, su and doas each), the
// host's connection failures, and the operations'.
func TestClassify(t *testing.T) {
	pw := &hostvars.Become{Method: "sudo", Password: "s3cret-pw"}
	nopw := &hostvars.Become{Method: "sudo"}
	for _, c := range []struct {
		name string
		st   stage
		err  error
		b    *hostvars.Become
		want string
	}{
		{"sudo wrong", stageBecome, remote("web1 → sudo:root", fmt.Errorf("sudo: %w (sudo said: \"Sorry, try again.\")", become.ErrWrongPassword)), pw, KindBecomeIncorrect},
		{"sudo missing", stageBecome, remote("web1 → sudo:root", fmt.Errorf("sudo: %w", become.ErrPasswordRequired)), nopw, KindBecomeMissing},
		{"su wrong", stageBecome, remote("web1 → su:app", fmt.Errorf("su: %w", become.ErrWrongPassword)), pw, KindBecomeIncorrect},
		{"su missing", stageBecome, remote("web1 → su:app", fmt.Errorf("su: %w", become.ErrPasswordRequired)), nopw, KindBecomeMissing},
		{"doas wrong", stageBecome, remote("web1 → doas:root", fmt.Errorf("doas: %w", become.ErrWrongPassword)), pw, KindBecomeIncorrect},
		{"doas missing", stageBecome, remote("web1 → doas:root", fmt.Errorf("doas: %w", become.ErrPasswordRequired)), nopw, KindBecomeMissing},
		{"auth, other words, with a password", stageBecome, remote("x", errkind.Errorf(errkind.ErrAuth, "refused")), pw, KindBecomeIncorrect},
		{"auth, other words, none", stageBecome, remote("x", errkind.Errorf(errkind.ErrAuth, "refused")), nopw, KindBecomeMissing},
		{"not allowed", stageBecome, remote("x", fmt.Errorf("sudo: %w", become.ErrNotAllowed)), pw, KindBecomeFailed},
		{"no such user", stageBecome, remote("x", fmt.Errorf("sudo: %w", become.ErrNoSuchUser)), pw, KindBecomeFailed},
		{"not installed", stageBecome, remote("x", fmt.Errorf("%w: doas", become.ErrNotInstalled)), pw, KindBecomeFailed},
		{"become timeout", stageBecome, remote("x", fmt.Errorf("sudo: %w", become.ErrTimeout)), pw, KindTimeout},
		{"host gone while becoming", stageBecome, &errkind.Error{Chain: "x", Kind: errkind.ErrDisconnected}, pw, KindUnreachable},
		{"login refused", stageHost, &errkind.Error{Chain: "ssh:web1", Kind: errkind.ErrAuth}, nil, KindUnreachable},
		{"host key", stageHost, &errkind.Error{Chain: "ssh:web1", Kind: errkind.ErrHostKey}, nil, KindUnreachable},
		{"connect timeout", stageHost, &errkind.Error{Chain: "ssh:web1", Kind: errkind.ErrTimeout}, nil, KindUnreachable},
		{"refused", stageHost, &errkind.Error{Chain: "ssh:web1", Err: errors.New("connection refused")}, nil, KindUnreachable},
		{"bad variables", stageResolve, errkind.Errorf(errkind.ErrBadArgs, "x"), nil, KindBadRequest},
		{"link died", stageOp, &errkind.Error{Chain: "x", Kind: errkind.ErrDisconnected}, nil, KindUnreachable},
		{"link stalled", stageOp, &errkind.Error{Chain: "x", Kind: errkind.ErrStalled}, nil, KindUnreachable},
		{"fetch source", stageOp, remote("x", errkind.Errorf(errkind.ErrNotFound, "open /x")), nil, KindNotFound},
		{"put source", stageOp, &errkind.Error{Op: "put", Err: os.ErrNotExist}, nil, KindNotFound},
		{"put's remote directory", stageWrite, remote("x", errkind.Errorf(errkind.ErrNotFound, "no dir")), nil, KindInternal},
		{"permission", stageOp, remote("x", errkind.Errorf(errkind.ErrPermission, "open")), nil, KindInternal},
		{"cancelled", stageHost, context.Canceled, nil, KindInternal},
	} {
		e := classify(c.st, c.err, &hostvars.Host{Password: "host-pw"}, c.b)
		if e.Kind != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, e.Kind, e.Message, c.want)
		}
	}
	// Passwords never reach the message, whatever the error says.
	e := classify(stageBecome, errors.New("said s3cret-pw and host-pw"), &hostvars.Host{Password: "host-pw"}, pw)
	if strings.Contains(e.Message, "s3cret-pw") || strings.Contains(e.Message, "host-pw") {
		t.Errorf("message: %s", e.Message)
	}
}
