package integration_test

import (
	"bufio"
	stdctx "context"
	"errors"
	"io"
	"net"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-rpc/spindle"
	"github.com/spindle-rpc/spindle/connectors/docker"
	"github.com/spindle-rpc/spindle/connectors/ssh"
	"github.com/spindle-rpc/spindle/connectors/sudo"
	"github.com/spindle-rpc/spindle/internal/testkit/containertest"
	"github.com/spindle-rpc/spindle/internal/testkit/topology"
	sexec "github.com/spindle-rpc/spindle/services/exec"
	"github.com/spindle-rpc/spindle/services/sys"
	"github.com/spindle-rpc/spindle/services/tunnel"
)

// sshTo are SSH options for one topology host, with the controller's key
// and known_hosts and nothing from root's ~/.ssh or ssh-agent.
func sshTo(tp *topology.Topology, h *topology.Host) ssh.Options {
	only := true
	return ssh.Options{
		Host: h.Addr, Port: h.Port, User: h.User.Name, ConfigFile: "none",
		IdentityFiles: []string{tp.Key.Path}, IdentitiesOnly: &only,
		KnownHostsFiles: []string{tp.KnownHosts}, ConnectTimeout: 20 * time.Second,
		// A dead hop is noticed within 3 s.
		KeepaliveInterval: time.Second, KeepaliveCountMax: 3,
	}
}

// txBytes is what the controller has sent toward bastion so far.
func txBytes(t *testing.T, tp *topology.Topology) int64 {
	t.Helper()
	b, err := os.ReadFile("/sys/class/net/" + tp.ControllerIface + "/statistics/tx_bytes")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestChainBastionWebContainerSudo: the controller reaches only bastion;
// bastion's agent alone reaches web (with the controller's key, which
// never leaves the controller); web's agent starts one in a container,
// which becomes root there with sudo. The agent binary crosses the
// controller's link once: web's comes from bastion's RAM, the
// container's from web's.
func TestChainBastionWebContainerSudo(t *testing.T) {
	t.Parallel()
	containertest.NeedDocker(t)
	tp := topology.New(t)
	sudoers(t, tp.Web.User.Name+" ALL=(ALL:ALL) NOPASSWD: ALL")
	// web's user runs docker (before its SSH login, which reads groups).
	if out, err := osexec.Command("usermod", "-aG", "docker", tp.Web.User.Name).CombinedOutput(); err != nil {
		t.Fatalf("usermod: %v: %s", err, out)
	}
	ctr := containertest.RunImage(t, containertest.DebianImage)
	tg := &target{}
	ctl, _, err := connect(t, tg, sshTo(tp, &tp.Web))
	if err == nil {
		t.Fatal("the controller reached web directly: the topology proves nothing")
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 90*time.Second)
	defer cancel()
	bastion, err := ctl.Connect(ctx, sshTo(tp, &tp.Bastion))
	if err != nil {
		t.Fatalf("bastion: %v", err)
	}
	before := txBytes(t, tp)
	web, err := bastion.Connect(ctx, sshTo(tp, &tp.Web))
	if err != nil {
		t.Fatalf("bastion → web: %v", err)
	}
	root, err := web.Connect(ctx, sudo.Options{})
	if err != nil {
		t.Fatalf("bastion → web → sudo: %v", err)
	}
	app, err := web.Connect(ctx, docker.Options{Container: ctr.Name, User: "app"})
	if err != nil {
		t.Fatalf("bastion → web → docker: %v", err)
	}
	ctrRoot, err := app.Connect(ctx, sudo.Options{})
	if err != nil {
		t.Fatalf("bastion → web → docker → sudo: %v", err)
	}
	sent := txBytes(t, tp) - before
	want := "ssh:" + tp.Bastion.Addr + " → ssh:" + tp.Web.Addr + " → sudo:root"
	if root.Name() != want {
		t.Errorf("chain name %q, want %q", root.Name(), want)
	}
	if info, err := sys.Info(ctx, app); err != nil || info.UID != 1000 || info.Hostname != ctr.Name {
		t.Fatalf("web → docker: %+v, %v; want uid 1000 on %s", info, err, ctr.Name)
	}
	if info, err := sys.Info(ctx, ctrRoot); err != nil || info.UID != 0 || info.Hostname != ctr.Name {
		t.Fatalf("web → docker → sudo: %+v, %v; want uid 0 on %s", info, err, ctr.Name)
	}
	if info, err := sys.Info(ctx, web); err != nil || info.UID != tp.Web.User.UID {
		t.Fatalf("web: %+v, %v", info, err)
	}
	if info, err := sys.Info(ctx, root); err != nil || info.UID != 0 {
		t.Fatalf("web → sudo: %+v, %v", info, err)
	}
	// Web, its sudo child, the container and its sudo child were all
	// bootstrapped from their parent's copy of the agent: the controller
	// sent only RPCs (and web's SSH handshake signatures) toward bastion,
	// far less than one agent (2+ MiB compressed).
	t.Logf("controller → bastion while connecting web, sudo, the container and sudo in it: %d bytes", sent)
	if sent > 256<<10 {
		t.Errorf("the controller sent %d bytes toward bastion to start the rest of the chain: did the agent binary cross the first link again?", sent)
	}
	for _, h := range []*topology.Host{&tp.Bastion, &tp.Web} {
		if keys := privateKeysUnder(t, h.User.Home); len(keys) > 0 {
			t.Errorf("private key files on %s: %v", h.Role, keys)
		}
	}

	// Killing bastion's agent fails the calls pending on web and behind
	// it at once, each naming bastion.
	pending := []*spindle.Future{
		web.Go(ctx, sexec.MethodRun, &sexec.Cmd{Argv: []string{"sleep", "60"}}),
		root.Go(ctx, sexec.MethodRun, &sexec.Cmd{Argv: []string{"sleep", "61"}}),
		ctrRoot.Go(ctx, sexec.MethodRun, &sexec.Cmd{Argv: []string{"sleep", "62"}}),
	}
	// Both calls have reached their agents once their sleeps run.
	waitProcess(t, tp.Web.User, "sleep 60")
	if err := syscall.Kill(bastion.Hello().PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i, f := range pending {
		err := f.Wait(nil)
		if !errors.Is(err, spindle.ErrDisconnected) || !strings.Contains(err.Error(), "ssh:"+tp.Bastion.Addr) {
			t.Errorf("pending call %d after bastion died: %v; want ErrDisconnected naming ssh:%s", i, err, tp.Bastion.Addr)
		}
	}
}

// A tunnel reaches what only the far end reaches: web's sshd, which the
// controller cannot connect to, answers through bastion → web.
func TestTunnelThroughBastion(t *testing.T) {
	t.Parallel()
	tp := topology.New(t)
	webAddr := net.JoinHostPort(tp.Web.Addr, strconv.Itoa(tp.Web.Port))
	if c, err := net.DialTimeout("tcp", webAddr, 2*time.Second); err == nil {
		c.Close()
		t.Fatal("the controller reached web directly: the topology proves nothing")
	}
	_, cx := mustConnect(t, nil, sshTo(tp, &tp.Bastion))
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 60*time.Second)
	defer cancel()
	web, err := cx.Connect(ctx, sshTo(tp, &tp.Web))
	if err != nil {
		t.Fatalf("bastion → web: %v", err)
	}
	// From web's agent, to web's own sshd; and from bastion's, to it too.
	for _, from := range []*spindle.Context{web, cx} {
		c, err := tunnel.Dial(ctx, from, "tcp", webAddr)
		if err != nil {
			t.Fatalf("tunnel from %s to %s: %v", from.Name(), webAddr, err)
		}
		banner, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || !strings.HasPrefix(banner, "SSH-2.0-") {
			t.Fatalf("through %s: %q, %v; want sshd's banner", from.Name(), banner, err)
		}
	}

	// The other way round (spindle forward -R): web's agent listens in
	// web's network, and what connects there reaches the controller,
	// which web has no route to.
	ln, err := tunnel.Listen(ctx, web, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening on web: %v", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, _ := io.ReadAll(c)
			c.Write([]byte("controller got " + string(b)))
			c.Close()
		}
	}()
	// Something on web connects to the port: here web's own agent.
	c, err := tunnel.Dial(ctx, web, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("connecting on web to its listener %s: %v", ln.Addr(), err)
	}
	io.WriteString(c, "hello from web")
	c.CloseWrite()
	b, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(b) != "controller got hello from web" {
		t.Fatalf("web → its listener → controller: %q, %v", b, err)
	}
}
