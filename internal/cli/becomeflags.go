package cli

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
)

// becomeOptions are the flags of sudo:, su: and doas: hops.
type becomeOptions struct {
	passwordEnv string // --become-password-env VAR
	ask         bool   // -K, --ask-become-pass (like ansible)

	asked  bool
	secret string
}

func (b *becomeOptions) addFlags(pf *pflag.FlagSet) {
	pf.StringVar(&b.passwordEnv, "become-password-env", "", "sudo/su/doas: read the become password from this environment variable")
	pf.BoolVarP(&b.ask, "ask-become-pass", "K", false, "sudo/su/doas: ask for the become password on the terminal (like ansible -K)")
}

// password returns the become password: from the environment, asked once
// on the terminal, or none (sudo and doas then run with -n and fail at
// once if the target needs one). It is never logged.
func (b *becomeOptions) password(o *connectOptions) (string, error) {
	if b.passwordEnv != "" {
		pw, ok := os.LookupEnv(b.passwordEnv)
		if !ok {
			return "", fmt.Errorf("--become-password-env %s: the variable is not set", b.passwordEnv)
		}
		return pw, nil
	}
	if !b.ask {
		return "", nil
	}
	if !b.asked {
		prompt := o.prompt
		if prompt == nil {
			prompt = readSecretTTY
		}
		pw, err := prompt("BECOME password: ")
		if err != nil {
			return "", err
		}
		b.secret, b.asked = pw, true
	}
	return b.secret, nil
}
