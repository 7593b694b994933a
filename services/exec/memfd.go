package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spindle-rpc/spindle/errkind"
	"github.com/spindle-rpc/spindle/services/modules/store"
	"github.com/spindle-rpc/spindle/services/modules/upcall"
	"golang.org/x/sys/unix"
)

// memfdCreate is unix.MemfdCreate; tests make it refuse.
var memfdCreate = unix.MemfdCreate

// procSelfFD is where a process finds its descriptors by path; tests
// point it elsewhere.
var procSelfFD = "/proc/self/fd/"

// memfdFallback says what a user whose kernel refuses memfd execution
// can do.
const memfdFallback = "leave Cmd.ExeMemfd off (spindle run: without --memfd) to run it from the agent's private cache directory"

// exeMemfd writes Cmd.Exe's program into a memfd and points cmd at it.
// An ELF binary is run by the agent's own descriptor, close-on-exec:
// the kernel opens the path before it closes the descriptor, and the
// program inherits nothing. A #! script's interpreter opens the path
// after the exec, so a script gets the memfd as its fd 3 (ExtraFiles)
// and runs as /proc/self/fd/3. The caller closes the returned file once
// the process started.
func exeMemfd(ctx context.Context, p *StdinPart) (path string, f *os.File, extra bool, err error) {
	if p.Offset != 0 || p.Length != 0 {
		return "", nil, false, errkind.Errorf(errkind.ErrBadArgs, "a slice of stored bytes is no program")
	}
	data := p.Data
	switch {
	case data != nil:
		sum, err := putPart(store.Default, p)
		if err != nil {
			return "", nil, false, err
		}
		if p.SHA256 != nil && !bytes.Equal(p.SHA256, sum[:]) {
			return "", nil, false, errkind.Errorf(errkind.ErrBadArgs, "its bytes hash to %x, not %x", sum, p.SHA256)
		}
	case p.SHA256 != nil:
		if data, err = upcall.Fetch(ctx, store.Default, p.SHA256); err != nil {
			return "", nil, false, err
		}
	default:
		return "", nil, false, errkind.Errorf(errkind.ErrBadArgs, "no bytes and no sha256")
	}
	fd, err := memfdCreate("spindle-exe", unix.MFD_CLOEXEC|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) { // a kernel before 6.3 knows no MFD_EXEC
		fd, err = memfdCreate("spindle-exe", unix.MFD_CLOEXEC)
	}
	if err != nil {
		return "", nil, false, memfdRefused("memfd_create", err)
	}
	f = os.NewFile(uintptr(fd), "memfd:spindle-exe")
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", nil, false, fmt.Errorf("memfd: %w", err)
	}
	own := procSelfFD + strconv.Itoa(fd)
	if _, err := os.Stat(own); err != nil {
		f.Close()
		return "", nil, false, errkind.Errorf(errkind.ErrNotFound, "memfd: %s is not there (/proc not mounted?), so no memfd can be executed: %s", own, memfdFallback)
	}
	if bytes.HasPrefix(data, []byte("#!")) {
		return procSelfFD + "3", f, true, nil
	}
	return own, f, false, nil
}

// memfdRefused explains a kernel's refusal of memfd execution.
func memfdRefused(op string, err error) error {
	why := fmt.Sprintf("memfd: the kernel refuses %s (%v): execution from memory is forbidden here (vm.memfd_noexec=2, a seccomp or SELinux policy); %s", op, err, memfdFallback)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		return errkind.Errorf(errkind.ErrPermission, "%s", why)
	}
	return errors.New(why)
}

// isMemfdPath says that prog is a memfd's path from exeMemfd.
func isMemfdPath(prog string) bool { return strings.HasPrefix(prog, procSelfFD) }
