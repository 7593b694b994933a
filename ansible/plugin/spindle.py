# Spindle connection plugin for Ansible.
# SPDX-License-Identifier: Apache-2.0
"""Connection plugin that runs tasks through a persistent ``spindle daemon``.

Each Ansible task runs in a fresh worker process, so nothing here outlives
one call: every exec_command, put_file, fetch_file and reset is a single
round trip on a private Unix socket to the daemon, which keeps the SSH
connections, agents and become children alive between tasks and runs. The
daemon is started on first use. The wire format is described in
PROTOCOL.md ("Ansible endpoint").
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: spindle
short_description: run tasks through a persistent Spindle agent on each host
description:
  - Runs commands and copies files through C(spindle daemon), which keeps one
    agent per host alive between tasks and runs, with sudo, su and doas done
    by a persistent become child of that agent.
  - Takes the same host variables as the ssh connection, so inventories work
    unchanged.
author: Spindle
options:
  remote_addr:
    description: Host name or address to connect to.
    type: string
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
      - name: ansible_ssh_host
      - name: delegated_vars['ansible_host']
      - name: delegated_vars['ansible_ssh_host']
  spindle_name:
    description: The inventory name of the host, used in the daemon's messages.
    type: string
    vars:
      - name: inventory_hostname
  delegate_to:
    description:
      - The task's delegate_to keyword. When set it names the host instead of
        inventory_hostname, which Ansible keeps as the original host's.
    type: string
    keyword:
      - name: delegate_to
  port:
    description: Remote port to connect to.
    type: int
    ini:
      - section: defaults
        key: remote_port
    env:
      - name: ANSIBLE_REMOTE_PORT
    vars:
      - name: ansible_port
      - name: ansible_ssh_port
    keyword:
      - name: port
  remote_user:
    description:
      - User name to log in as. If unset, the user's SSH configuration decides.
    type: string
    ini:
      - section: defaults
        key: remote_user
    env:
      - name: ANSIBLE_REMOTE_USER
    vars:
      - name: ansible_user
      - name: ansible_ssh_user
    cli:
      - name: user
    keyword:
      - name: remote_user
  password:
    description: Login password for the remote user (no sshpass needed).
    type: string
    vars:
      - name: ansible_password
      - name: ansible_ssh_pass
      - name: ansible_ssh_password
  private_key_file:
    description: Private key file for authentication.
    type: string
    ini:
      - section: defaults
        key: private_key_file
    env:
      - name: ANSIBLE_PRIVATE_KEY_FILE
    vars:
      - name: ansible_private_key_file
      - name: ansible_ssh_private_key_file
    cli:
      - name: private_key_file
        option: '--private-key'
  ssh_args:
    description:
      - Arguments as for the ssh CLI. C(-o K=V), C(-J), C(-F), C(-i), C(-p) and
        C(-l) are understood; ControlMaster, ControlPath and ControlPersist are
        ignored (the daemon keeps connections itself).
    type: string
    ini:
      - section: ssh_connection
        key: ssh_args
    env:
      - name: ANSIBLE_SSH_ARGS
    vars:
      - name: ansible_ssh_args
  ssh_common_args:
    description: Common extra arguments, read like ssh_args.
    type: string
    default: ''
    ini:
      - section: ssh_connection
        key: ssh_common_args
    env:
      - name: ANSIBLE_SSH_COMMON_ARGS
    vars:
      - name: ansible_ssh_common_args
    cli:
      - name: ssh_common_args
  ssh_extra_args:
    description: Extra arguments, read like ssh_args.
    type: string
    default: ''
    ini:
      - section: ssh_connection
        key: ssh_extra_args
    env:
      - name: ANSIBLE_SSH_EXTRA_ARGS
    vars:
      - name: ansible_ssh_extra_args
    cli:
      - name: ssh_extra_args
  host_key_checking:
    description:
      - Set to false to accept unknown and changed host keys. True leaves it
        to the SSH configuration, as the ssh connection does.
    type: boolean
    default: true
    ini:
      - section: defaults
        key: host_key_checking
      - section: ssh_connection
        key: host_key_checking
    env:
      - name: ANSIBLE_HOST_KEY_CHECKING
      - name: ANSIBLE_SSH_HOST_KEY_CHECKING
    vars:
      - name: ansible_host_key_checking
      - name: ansible_ssh_host_key_checking
  timeout:
    description: Seconds to wait while establishing a connection.
    type: integer
    default: 10
    ini:
      - section: defaults
        key: timeout
      - section: ssh_connection
        key: timeout
    env:
      - name: ANSIBLE_TIMEOUT
      - name: ANSIBLE_SSH_TIMEOUT
    vars:
      - name: ansible_ssh_timeout
    cli:
      - name: timeout
  pipelining:
    description:
      - Send modules on stdin instead of copying them to a temporary file.
        On by default, since it saves several round trips per task.
    type: boolean
    default: true
    ini:
      - section: defaults
        key: pipelining
      - section: connection
        key: pipelining
      - section: ssh_connection
        key: pipelining
    env:
      - name: ANSIBLE_PIPELINING
      - name: ANSIBLE_SSH_PIPELINING
    vars:
      - name: ansible_pipelining
      - name: ansible_ssh_pipelining
  spindle_via:
    description:
      - Hops before the host, as a Spindle chain string, for example
        C(bastion) or C(admin@bastion:2222,sudo).
    type: string
    vars:
      - name: ansible_spindle_via
  spindle_target:
    description:
      - The host's own hop(s) instead of SSH to its address, for example
        C(docker:app1); reached after spindle_via.
    type: string
    vars:
      - name: ansible_spindle_target
  spindle_path:
    description:
      - The spindle binary. Defaults to the one that installed this plugin,
        else C(spindle) on PATH.
    type: string
    ini:
      - section: spindle
        key: path
    env:
      - name: ANSIBLE_SPINDLE_PATH
    vars:
      - name: ansible_spindle_path
  spindle_become_native:
    description:
      - Run sudo, su and doas on a persistent become child of the host's
        agent. When false, Ansible's become command runs as it is.
    type: boolean
    default: true
    ini:
      - section: spindle
        key: become_native
    env:
      - name: ANSIBLE_SPINDLE_BECOME_NATIVE
    vars:
      - name: ansible_spindle_become_native
  spindle_module_runner:
    description:
      - Run pipelined modules in a fork of a warm Python runner on the
        target (one per interpreter and become user) instead of a fresh
        interpreter per task. When false, every module starts its own.
    type: boolean
    default: true
    ini:
      - section: spindle
        key: module_runner
    env:
      - name: ANSIBLE_SPINDLE_MODULE_RUNNER
    vars:
      - name: ansible_spindle_module_runner
  spindle_idle:
    description:
      - How long the daemon it starts stays up with nothing to do (a Go
        duration such as C(10m)).
    type: string
    default: 10m
    ini:
      - section: spindle
        key: idle
    env:
      - name: ANSIBLE_SPINDLE_IDLE
    vars:
      - name: ansible_spindle_idle
"""

import errno
import hashlib
import json
import os
import re
import select
import shlex
import shutil
import socket
import stat
import struct
import time
import typing as t

from ansible import constants as C
from ansible.errors import AnsibleConnectionFailure, AnsibleError, AnsibleFileNotFound
from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display

display = Display()

# Stamped by `spindle ansible install`; keep these two lines exactly as they are.
SPINDLE_VERSION = "dev"
SPINDLE_PATH = ""

PROTOCOL_VERSION = 1
MAX_HEADER = 1 << 20
MAX_BODY = 64 << 20

# How long a starting daemon may take to say it is ready, and how long an
# old daemon told to stop may keep its socket.
START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0

NATIVE_BECOME = ("sudo", "su", "doas")

# Become methods whose command reads the password from stdin when its flags
# ask for it (sudo -S), so a fallback can feed it before the payload; su
# reads it from stdin whenever stdin is not a terminal.
STDIN_FLAG_BECOME = ("sudo", "dzdo", "sudosu")
STDIN_BECOME = ("su",)


# _paths' results in this process, by what they depend on.
_PATHS: dict = {}


class DaemonDied(Exception):
    """The socket broke while a request was in flight."""


class DaemonError(Exception):
    """The daemon answered with {"error": {"kind", "message"}}."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def short_become_name(plugin: t.Any) -> str:
    """sudo for sudo, ansible.builtin.sudo and community.general.sudo alike."""
    name = getattr(plugin, "name", None) or getattr(plugin, "_load_name", None) or ""
    return str(name).rsplit(".", 1)[-1]


def runtime_dir() -> str:
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base:
        return os.path.join(base, "spindle")
    return "/tmp/spindle-%d" % os.getuid()


def private_dir(path: str) -> str:
    """Creates path 0700 if needed and refuses one that others could use."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as e:
        raise AnsibleError("spindle: cannot create the daemon's directory %s: %s" % (path, e))
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise AnsibleError(
            "spindle: refusing to use %s: it must be a directory owned by uid %d and "
            "not accessible by group or others (fix it or remove it)" % (path, os.getuid())
        )
    return path


def socket_path(binary: str, directory: str) -> str:
    """One daemon per binary, agent socket and home: each may see other keys."""
    key = "\0".join((os.path.realpath(binary), os.environ.get("SSH_AUTH_SOCK", ""), os.environ.get("HOME", "")))
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return os.path.join(directory, "ansible-%s.sock" % digest)


def encode_request(header: dict, body: bytes = b"") -> bytes:
    if body:
        header = dict(header, stdin_len=len(body))
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    if len(raw) > MAX_HEADER:
        raise AnsibleError("spindle: request header of %d bytes is over the %d limit" % (len(raw), MAX_HEADER))
    if len(body) > MAX_BODY:
        raise AnsibleError("spindle: stdin of %d bytes is over the %d limit" % (len(body), MAX_BODY))
    return struct.pack(">I", len(raw)) + raw + body


class Reader:
    """Reads a response from a socket: the first read takes what has come,
    so that a small response costs one recv."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def exact(self, n: int) -> bytes:
        if len(self.buf) >= n:
            out, self.buf = self.buf[:n], self.buf[n:]
            return out
        chunks = [self.buf]
        n -= len(self.buf)
        self.buf = b""
        while n > 0:
            chunk = self.sock.recv(max(min(n, 1 << 20), 1 << 16))
            if not chunk:
                raise DaemonDied("connection closed before the full response")
            if len(chunk) > n:
                chunk, self.buf = chunk[:n], chunk[n:]
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)


def read_response(sock: socket.socket) -> tuple[dict, bytes, bytes]:
    r = Reader(sock)
    (n,) = struct.unpack(">I", r.exact(4))
    if n < 1 or n > MAX_HEADER:
        raise DaemonDied("response header length %d out of range" % n)
    try:
        header = json.loads(r.exact(n).decode("utf-8"))
    except ValueError as e:
        raise DaemonDied("response header is not JSON: %s" % e)
    if not isinstance(header, dict):
        raise DaemonDied("response header is not a JSON object")
    error = header.get("error")
    if error is not None:
        if not isinstance(error, dict):
            error = {"message": str(error)}
        raise DaemonError(str(error.get("kind") or "internal"), str(error.get("message") or "no message"))
    lengths = []
    for name in ("stdout_len", "stderr_len"):
        value = header.get(name, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise DaemonDied("response field %s is not a length: %r" % (name, value))
        lengths.append(value)
    return header, r.exact(lengths[0]), r.exact(lengths[1])


class Connection(ConnectionBase):
    """Ansible connection whose every call is one round trip to spindle daemon."""

    transport = "spindle"
    has_pipelining = True
    has_tty = False

    def __init__(self, play_context: t.Any, *args: t.Any, **kwargs: t.Any) -> None:
        super().__init__(play_context, *args, **kwargs)
        # What the wrapped become plugin recorded for the command it was last
        # asked to wrap: (that command, the "become" object to send).
        self._spindle_become: tuple[str, dict] | None = None

    # ---- options -----------------------------------------------------------

    def _opt(self, name: str, default: t.Any = None) -> t.Any:
        try:
            value = self.get_option(name)
        except KeyError:
            return default
        return default if value is None else value

    def _host(self) -> dict:
        address = self._opt("remote_addr") or getattr(self._play_context, "remote_addr", None)
        try:
            port = self._opt("port")
            port = int(port) if port not in (None, "") else None
            timeout = self._opt("timeout")
            timeout = int(timeout) if timeout not in (None, "") else None
        except (TypeError, ValueError) as e:
            raise AnsibleError("spindle: port and timeout must be whole numbers: %s" % e)
        # Only an explicit "no" changes anything, as with the ssh connection:
        # true leaves host key policy to the user's SSH configuration.
        checking = None if self._opt("host_key_checking", True) else False
        password = self._opt("password") or getattr(self._play_context, "password", None)
        return {
            "name": self._opt("delegate_to") or self._opt("spindle_name") or address,
            "address": address or None,
            "port": port,
            "user": self._opt("remote_user") or None,
            "password": password or None,
            "private_key_file": self._opt("private_key_file") or None,
            "ssh_args": self._opt("ssh_args") or None,
            "ssh_common_args": self._opt("ssh_common_args") or None,
            "ssh_extra_args": self._opt("ssh_extra_args") or None,
            "host_key_checking": checking,
            "timeout": timeout,
            "via": self._opt("spindle_via") or None,
            "target": self._opt("spindle_target") or None,
        }

    def _binary(self) -> str:
        path = self._opt("spindle_path") or SPINDLE_PATH or "spindle"
        if os.sep not in path:
            found = shutil.which(path)
            if not found:
                raise AnsibleError(
                    "spindle: the %r binary is not on PATH; set ansible_spindle_path or "
                    "ANSIBLE_SPINDLE_PATH, or run `spindle ansible install` again" % path
                )
            path = found
        return path

    # ---- become ------------------------------------------------------------

    def _native_method(self, plugin: t.Any) -> str | None:
        method = short_become_name(plugin)
        if method in NATIVE_BECOME and self._opt("spindle_become_native", True):
            return method
        return None

    def _become_opt(self, plugin: t.Any, name: str) -> t.Any:
        try:
            return plugin.get_option(name)
        except KeyError:  # a third-party plugin without the base options
            return getattr(self._play_context, name, None)

    def set_become_plugin(self, plugin: t.Any) -> None:
        # self.become must stay the plugin: Ansible reads its options from it,
        # and a None here would make it skip become altogether.
        super().set_become_plugin(plugin)
        self._spindle_become = None
        if plugin is None:
            return
        plugin._spindle_connection = self
        if getattr(plugin, "_spindle_real_build", None) is not None:
            return
        plugin._spindle_real_build = plugin.build_become_command

        def build_become_command(cmd: str, shell: t.Any) -> str:
            return plugin._spindle_connection._build_become_command(plugin, cmd, shell)

        plugin.build_become_command = build_become_command

    def _build_become_command(self, plugin: t.Any, cmd: str, shell: t.Any) -> str:
        """Records the identity for a native become and leaves cmd as it is;
        otherwise lets the become plugin wrap cmd the usual way."""
        # Options are set after set_become_plugin, so decide here.
        method = self._native_method(plugin)
        if method is None or not cmd:
            self._spindle_become = None
            return plugin._spindle_real_build(cmd, shell)
        become = {
            "method": method,
            "user": self._become_opt(plugin, "become_user") or "root",
            "password": self._become_opt(plugin, "become_pass") or None,
            "flags": self._become_opt(plugin, "become_flags") or None,
            "exe": self._become_opt(plugin, "become_exe") or None,
        }
        self._spindle_become = (cmd, become)
        return cmd

    def is_pipelining_enabled(self, wrap_async: bool = False) -> bool:
        # ansible-core 2.19+ asks the connection; su pipelines fine natively.
        if wrap_async or C.DEFAULT_KEEP_REMOTE_FILES or not self._opt("pipelining", True):
            return False
        if self.become is not None and self._native_method(self.become) is None:
            return bool(getattr(self.become, "pipelining", True))
        return True

    def _become_for(self, cmd: str, sudoable: bool) -> dict | None:
        recorded, self._spindle_become = self._spindle_become, None
        if not sudoable or recorded is None:
            return None
        wrapped, become = recorded
        # Ansible quotes the wrapped command into `sh -c '...'`.
        if wrapped in cmd or wrapped.replace("'", "'\"'\"'") in cmd:
            return become
        return None

    def _fallback_stdin(self, cmd: str, sudoable: bool) -> bytes:
        """The password line a non-native become reads first, or b""."""
        plugin = self.become
        if not sudoable or plugin is None or not getattr(plugin, "success", "") or plugin.success not in cmd:
            return b""
        name = short_become_name(plugin)
        if not plugin.expect_prompt() or name not in STDIN_FLAG_BECOME + STDIN_BECOME:
            return b""
        flags = self._become_opt(plugin, "become_flags") or ""
        if name in STDIN_FLAG_BECOME and not any(f == "--stdin" or re.match(r"^-[A-Za-z]*S", f) for f in shlex.split(flags)):
            return b""
        password = self._become_opt(plugin, "become_pass")
        return str(password).encode("utf-8", "surrogateescape") + b"\n"

    def _fallback_output(self, cmd: str, sudoable: bool, stdout: bytes, stderr: bytes) -> tuple[bytes, bytes]:
        """Does what ssh.py does with a become plugin's prompt and marker."""
        plugin = self.become
        if not sudoable or plugin is None or not getattr(plugin, "success", "") or plugin.success not in cmd:
            return stdout, stderr
        prompt = getattr(plugin, "prompt", "")
        if isinstance(prompt, str) and prompt:
            stderr = stderr.replace(prompt.encode("utf-8"), b"", 1)
            stdout = stdout.replace(prompt.encode("utf-8"), b"", 1)
        elif prompt and plugin.check_password_prompt(stderr):
            # su's localised "Password: ", written with no newline after it.
            stderr = re.sub(rb"^[^\n]*?(?::|\xef\xbc\x9a) ?", b"", stderr, count=1)
        marker = plugin.success.encode("utf-8")
        lines = stdout.splitlines(True)
        for i, line in enumerate(lines):
            if marker in line:
                return b"".join(lines[:i] + lines[i + 1:]), stderr
        both = stdout + stderr
        if sudoable and plugin.check_incorrect_password(both):
            raise AnsibleError("Incorrect %s password" % plugin.name)
        if sudoable and plugin.check_missing_password(both):
            raise AnsibleError("Missing %s password" % plugin.name)
        return stdout, stderr

    # ---- daemon ------------------------------------------------------------

    def _paths(self) -> tuple[str, str, str]:
        # Worked out once per process for the same inputs: a task's worker
        # may call several times, and the lookups are a tenth of a warm
        # call. A daemon start checks the directory again.
        key = (
            self._opt("spindle_path"), os.environ.get("PATH"), os.environ.get("XDG_RUNTIME_DIR"),
            os.environ.get("SSH_AUTH_SOCK"), os.environ.get("HOME"), os.getuid(),
        )
        parts = _PATHS.get(key)
        if parts is None:
            binary = self._binary()
            sock = socket_path(binary, private_dir(runtime_dir()))
            parts = _PATHS[key] = (binary, sock, sock[: -len(".sock")] + ".log")
        return parts

    @staticmethod
    def _dial(sock_path: str) -> socket.socket | None:
        """A connected socket, or None when no daemon listens there."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(sock_path)
        except OSError as e:
            s.close()
            if e.errno in (errno.ENOENT, errno.ECONNREFUSED):
                return None
            raise AnsibleConnectionFailure("spindle: cannot connect to the daemon at %s: %s" % (sock_path, e))
        return s

    def _start_daemon(self, binary: str, sock_path: str, log_path: str) -> str:
        """Starts a detached daemon; returns what it wrote on its ready pipe."""
        idle = str(self._opt("spindle_idle", "10m"))
        argv = [binary, "daemon", "--ansible", "--socket", sock_path, "--idle", idle, "--log", log_path, "--ready-fd", "3"]
        display.vvv("SPINDLE: starting %s" % " ".join(shlex.quote(a) for a in argv))
        r, w = os.pipe()
        try:
            if w == 3:  # dup2 onto itself would keep close-on-exec
                w2 = os.dup(w)
                os.close(w)
                w = w2
            # The pipe first: w may be 0-2 in a process started without them.
            actions = [
                (os.POSIX_SPAWN_DUP2, w, 3),
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ]
            try:
                pid = os.posix_spawn(binary, argv, os.environ, file_actions=actions, setsid=True)
            except OSError as e:
                raise AnsibleConnectionFailure("spindle: cannot start %s: %s" % (binary, e))
        finally:
            os.close(w)
        try:
            out = b""
            deadline = time.monotonic() + START_TIMEOUT
            while len(out) < 65536:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([r], [], [], left)[0]:
                    out += b" (timed out waiting for the daemon; see %s)" % log_path.encode()
                    break
                chunk = os.read(r, 4096)
                if not chunk:
                    break
                out += chunk
        finally:
            os.close(r)
        try:  # a daemon that lost the race to another one has exited already
            os.waitpid(pid, os.WNOHANG)
        except OSError:
            pass
        return out.decode("utf-8", "replace").strip()

    def _connect_daemon(self, binary: str, sock_path: str, log_path: str, autostart: bool) -> socket.socket | None:
        s = self._dial(sock_path)
        if s is not None or not autostart:
            return s
        private_dir(os.path.dirname(sock_path))
        ready = self._start_daemon(binary, sock_path, log_path)
        s = self._dial(sock_path)
        if s is not None:
            return s
        if ready == "ok":
            ready = "it reported ready, but nothing listens on %s" % sock_path
        raise AnsibleConnectionFailure(
            "spindle daemon did not start: %s (log: %s)" % (ready or "it exited without a word", log_path)
        )

    def _round_trip(self, sock_path_parts: tuple[str, str, str], header: dict, body: bytes, autostart: bool):
        # Encoded before connecting, so that the request is there when the
        # daemon wakes for the connection: one wake-up of it, not two.
        request = encode_request(header, body)
        s = self._connect_daemon(*sock_path_parts, autostart=autostart)
        if s is None:
            return None
        try:
            s.sendall(request)
            return read_response(s)
        except (OSError, struct.error) as e:
            raise DaemonDied(str(e))
        finally:
            s.close()

    def _stop_daemon(self, parts: tuple[str, str, str]) -> None:
        sock_path = parts[1]
        try:
            self._round_trip(parts, {"v": PROTOCOL_VERSION, "spindle": "", "op": "stop"}, b"", autostart=False)
        except (DaemonDied, DaemonError) as e:
            display.vvv("SPINDLE: stopping the old daemon: %s" % e)
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline:
            s = self._dial(sock_path)
            if s is None:
                return
            s.close()
            time.sleep(0.05)
        raise AnsibleConnectionFailure("spindle: the old daemon at %s did not stop; kill it and retry" % sock_path)

    def _call(self, op: str, fields: dict, body: bytes = b"", autostart: bool = True):
        """One request; returns (header, stdout, stderr), or None if no daemon
        runs and autostart is false."""
        parts = self._paths()
        header = dict(fields, v=PROTOCOL_VERSION, spindle=SPINDLE_VERSION, op=op)
        try:
            try:
                return self._round_trip(parts, header, body, autostart)
            except DaemonError as e:
                if e.kind != "version":
                    raise
                display.vvv("SPINDLE: restarting a daemon of another version: %s" % e.message)
                self._stop_daemon(parts)
                return self._round_trip(parts, header, body, autostart=True)
        except DaemonDied as e:
            raise AnsibleConnectionFailure("spindle daemon died: %s (log: %s)" % (e, parts[2]))
        except DaemonError as e:
            raise self._error(e, fields.get("become"))

    @staticmethod
    def _error(e: DaemonError, become: dict | None) -> Exception:
        method = (become or {}).get("method") or "become"
        if e.kind in ("unreachable", "become_failed", "timeout"):
            return AnsibleConnectionFailure(e.message)
        if e.kind == "become_password_incorrect":
            return AnsibleError("Incorrect %s password: %s" % (method, e.message))
        if e.kind == "become_password_missing":
            return AnsibleError("Missing %s password: %s" % (method, e.message))
        if e.kind == "not_found":
            return AnsibleFileNotFound(e.message)
        return AnsibleError(e.message)

    # ---- the connection API ------------------------------------------------

    def _connect(self) -> "Connection":
        if not self._connected:
            display.vvv("ESTABLISH SPINDLE CONNECTION FOR USER: %s" % self._opt("remote_user"), host=self._opt("remote_addr"))
            self._connected = True
        return self

    def exec_command(self, cmd: str, in_data: bytes | None = None, sudoable: bool = True) -> tuple[int, bytes, bytes]:
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        if isinstance(cmd, bytes):
            cmd = cmd.decode("utf-8", "surrogateescape")
        become = self._become_for(cmd, sudoable)
        body = in_data or b""
        if become is None:
            body = self._fallback_stdin(cmd, sudoable) + body
        who = "%s via %s" % (become["user"], become["method"]) if become else "login user"
        display.vvv("SPINDLE: EXEC as %s: %s" % (who, cmd), host=self._opt("remote_addr"))
        header, stdout, stderr = self._call(
            "exec",
            {
                "host": self._host(),
                "become": become,
                "cmd": cmd,
                "pty": False,
                "module_runner": bool(self._opt("spindle_module_runner", True)),
            },
            body,
        )
        rc = header.get("rc")
        if not isinstance(rc, int) or isinstance(rc, bool):
            raise AnsibleError("spindle: the daemon returned no exit status for %r" % cmd)
        if become is None:
            stdout, stderr = self._fallback_output(cmd, sudoable, stdout, stderr)
        return rc, stdout, stderr

    def put_file(self, in_path: str, out_path: str) -> None:
        super().put_file(in_path, out_path)
        src = os.path.abspath(in_path)
        if not os.path.exists(src):
            raise AnsibleFileNotFound("file or module does not exist: %s" % src)
        display.vvv("SPINDLE: PUT %s TO %s" % (src, out_path), host=self._opt("remote_addr"))
        # Files land as the login user, as with ssh: Ansible gives the become
        # user access itself.
        self._call("put", {"host": self._host(), "become": None, "src": src, "dst": out_path})

    def fetch_file(self, in_path: str, out_path: str) -> None:
        super().fetch_file(in_path, out_path)
        dst = os.path.abspath(out_path)
        display.vvv("SPINDLE: FETCH %s TO %s" % (in_path, dst), host=self._opt("remote_addr"))
        self._call("fetch", {"host": self._host(), "become": None, "src": in_path, "dst": dst})

    def reset(self) -> None:
        # Nothing to forget if no daemon runs; never start one for this.
        try:
            self._call("reset", {"host": self._host()}, autostart=False)
        except AnsibleError as e:
            display.warning("spindle: reset_connection failed: %s" % e)
        self.close()

    def close(self) -> None:
        # Connections live in the daemon; nothing is held per task.
        self._connected = False
