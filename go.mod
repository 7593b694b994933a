module github.com/spindle-rpc/spindle

go 1.26.8

require (
	github.com/creack/pty v1.1.24
	github.com/hashicorp/yamux v0.1.2
	github.com/kevinburke/ssh_config v1.6.0
	github.com/schollz/progressbar/v3 v3.19.1
	github.com/skeema/knownhosts v1.3.3
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	github.com/vmihailenco/msgpack/v5 v5.4.1
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.28.0
	golang.org/x/crypto v0.58.0
	golang.org/x/sys v0.49.0
	golang.org/x/term v0.47.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
)

// Spindle carries a patched yamux (third_party/yamux/README.spindle.md):
// its streams keep received data in pooled chunks instead of a buffer
// that doubles (zeroed) whenever the reader lags.
replace github.com/hashicorp/yamux => ./third_party/yamux

replace golang.org/x/crypto => ./third_party/xcrypto
