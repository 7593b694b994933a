# SPDX-License-Identifier: Apache-2.0
"""Unit tests of the spindle connection plugin against a fake daemon.

The fake speaks the plugin <-> daemon protocol (PROTOCOL.md, "Ansible
endpoint") on a temporary Unix socket, in a thread or, for the autostart
tests, in a process started by a fake `spindle` script. Run with the
system's Python, which has ansible-core:

    /usr/bin/python3 -m unittest discover -s ansible/plugin -p 'test_*.py'
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import stat
import struct
import sys
import tempfile
import threading
import unittest

from ansible.errors import AnsibleConnectionFailure, AnsibleError, AnsibleFileNotFound
from ansible.playbook.play_context import PlayContext
from ansible.plugins import loader as plugin_loader
from ansible.plugins.loader import become_loader, connection_loader

HERE = os.path.dirname(os.path.abspath(__file__))

if hasattr(plugin_loader, "init_plugin_loader"):  # ansible-core 2.15+
    plugin_loader.init_plugin_loader()
connection_loader.add_directory(HERE)

LOGIN_PASSWORD = "login-secret-4711"
BECOME_PASSWORD = "become-secret-0815"


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("short read")
        data += chunk
    return data


def response(header: dict, stdout: bytes = b"", stderr: bytes = b"") -> bytes:
    header = dict(header)
    if "error" not in header:
        header.update(stdout_len=len(stdout), stderr_len=len(stderr))
    raw = json.dumps(header).encode()
    return struct.pack(">I", len(raw)) + raw + stdout + stderr


def echo_handler(header: dict, body: bytes) -> bytes:
    """exec answers rc 3, the command on stdout and stdin on stderr."""
    if header["op"] == "exec":
        return response({"rc": 3}, header["cmd"].encode(), body)
    if header["op"] == "hello":
        return response({"version": "dev", "pid": os.getpid()})
    return response({})


class FakeDaemon:
    """Serves the protocol on path, one request per connection, recording
    each (header, body); handler returns the raw response bytes."""

    def __init__(self, path: str, handler=echo_handler) -> None:
        self.path = path
        self.handler = handler
        self.requests: list[tuple[dict, bytes]] = []
        self.stopped = threading.Event()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(16)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                self.handle(conn)

    def handle(self, conn: socket.socket) -> None:
        (n,) = struct.unpack(">I", recv_exact(conn, 4))
        header = json.loads(recv_exact(conn, n))
        body = recv_exact(conn, header.get("stdin_len", 0))
        self.requests.append((header, body))
        if header["op"] == "stop":
            conn.sendall(response({}))
            self.stopped.set()
            return
        conn.sendall(self.handler(header, body))

    def close(self) -> None:
        self.stopped.set()
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        self.thread.join()
        if os.path.exists(self.path):
            os.unlink(self.path)


def fake_spindle_main(argv: list[str]) -> None:
    """The fake `spindle daemon --ansible ...` run by the autostart tests.

    FAKE_SPINDLE_STATE names a directory: each start appends a line to
    starts; versions holds one daemon version per start (the last repeats);
    fail, if present, is written on the ready pipe instead of "ok"."""
    assert argv[1:3] == ["daemon", "--ansible"], argv
    args = dict(zip(argv[3::2], argv[4::2]))
    state = os.environ["FAKE_SPINDLE_STATE"]
    with open(os.path.join(state, "starts"), "a") as f:
        f.write(" ".join(argv) + "\n")
    with open(os.path.join(state, "starts")) as f:
        starts = len(f.read().splitlines())
    with open(os.path.join(state, "versions")) as f:
        versions = f.read().split()
    version = versions[min(starts, len(versions)) - 1]
    ready = int(args["--ready-fd"])
    fail = os.path.join(state, "fail")
    if os.path.exists(fail):
        with open(fail, "rb") as f:
            os.write(ready, f.read())
        sys.exit(1)

    def handler(header: dict, body: bytes) -> bytes:
        if header.get("spindle") not in ("", "dev", version):
            return response({"error": {"kind": "version", "message": "daemon is %s, plugin is %s" % (version, header["spindle"])}})
        if header["op"] == "exec":
            return response({"rc": 0}, ("%s ran %s" % (version, header["cmd"])).encode())
        return response({})

    daemon = FakeDaemon(args["--socket"], handler)
    os.write(ready, b"ok")
    os.close(ready)
    # Exits on "stop", or on its own after a while so that no test leaks it.
    daemon.stopped.wait(60)
    daemon.close()


FAKE_SPINDLE = """#!/usr/bin/python3
import sys
sys.path.insert(0, %r)
import test_spindle
test_spindle.fake_spindle_main(sys.argv)
""" % HERE


class Recorder:
    """Stands in for the plugin's Display and keeps every line shown."""

    def __init__(self, shown: list[str]) -> None:
        self.shown = shown

    def __getattr__(self, level: str):
        def record(msg, *args, **kwargs) -> None:
            self.shown.append("%s %s %r %r" % (level, msg, args, kwargs))

        return record


class PluginTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        runtime = os.path.join(self.tmp.name, "run")
        os.mkdir(runtime, 0o700)
        self.env = {"XDG_RUNTIME_DIR": runtime, "SSH_AUTH_SOCK": "/agent.sock", "HOME": self.tmp.name}
        saved = {k: os.environ.get(k) for k in list(self.env) + ["FAKE_SPINDLE_STATE"]}
        os.environ.update(self.env)

        def restore() -> None:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

        self.addCleanup(restore)
        # A binary the plugin hashes into the socket name; the thread tests
        # never start it.
        self.binary = os.path.join(self.tmp.name, "spindle")
        with open(self.binary, "w") as f:
            f.write(FAKE_SPINDLE)
        os.chmod(self.binary, 0o755)
        self.state = os.path.join(self.tmp.name, "state")
        os.mkdir(self.state)
        with open(os.path.join(self.state, "versions"), "w") as f:
            f.write("dev\n")
        os.environ["FAKE_SPINDLE_STATE"] = self.state
        self.shown: list[str] = []
        self.mod = sys.modules[type(connection_loader.get("spindle", PlayContext(), os.devnull)).__module__]

    def connection(self, variables: dict | None = None, task_keys: dict | None = None):
        conn = connection_loader.get("spindle", PlayContext(), os.devnull)
        self.assertIsNotNone(conn, "the spindle plugin did not load from %s" % HERE)
        base = {"inventory_hostname": "web1", "ansible_spindle_path": self.binary}
        base.update(variables or {})
        conn.set_options(task_keys=task_keys or {}, var_options=base)
        self.record_display()
        return conn

    def record_display(self) -> None:
        if not isinstance(self.mod.display, Recorder):
            original = self.mod.display
            self.mod.display = Recorder(self.shown)
            self.addCleanup(setattr, self.mod, "display", original)

    def socket_path(self) -> str:
        return self.mod.socket_path(self.binary, os.path.join(self.env["XDG_RUNTIME_DIR"], "spindle"))

    def fake(self, handler=echo_handler) -> FakeDaemon:
        directory = os.path.join(self.env["XDG_RUNTIME_DIR"], "spindle")
        os.makedirs(directory, 0o700, exist_ok=True)
        daemon = FakeDaemon(self.socket_path(), handler)
        self.addCleanup(daemon.close)
        return daemon

    def become(self, conn, name: str = "sudo", **variables):
        plugin = become_loader.get(name)
        self.assertIsNotNone(plugin, "no %s become plugin" % name)
        plugin.set_options(var_options=variables)
        conn.set_become_plugin(plugin)
        return plugin

    @staticmethod
    def ansible_command(conn, cmd: str, sudoable: bool = True) -> str:
        """What ActionBase._low_level_execute_command makes of cmd."""
        if sudoable and conn.become is not None:
            cmd = conn.become.build_become_command(cmd, conn._shell)
        return "/bin/sh -c " + shlex.quote(cmd + " && sleep 0")

    def starts(self) -> list[str]:
        path = os.path.join(self.state, "starts")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return f.read().splitlines()

    def stop_started_daemon(self) -> None:
        """Stops a daemon the fake script started, so none outlives a test."""
        conn = self.connection()
        sock = self.socket_path()
        if os.path.exists(sock):
            conn._stop_daemon(conn._paths())


class FramingTest(PluginTest):
    def test_request_is_length_header_then_body(self) -> None:
        frame = self.mod.encode_request({"op": "exec"}, b"abc")
        (n,) = struct.unpack(">I", frame[:4])
        self.assertEqual(json.loads(frame[4 : 4 + n]), {"op": "exec", "stdin_len": 3})
        self.assertEqual(frame[4 + n :], b"abc")
        self.assertNotIn(b"stdin_len", self.mod.encode_request({"op": "exec"}))

    def test_exec_round_trip_returns_bytes_as_produced(self) -> None:
        def handler(header: dict, body: bytes) -> bytes:
            return response({"rc": 7, "ignored": [1]}, b"\x00out\xff", b"err\r\n")

        daemon = self.fake(handler)
        conn = self.connection()
        rc, out, err = conn.exec_command("true", in_data=b"\x01payload\x00")
        self.assertEqual((rc, out, err), (7, b"\x00out\xff", b"err\r\n"))
        header, body = daemon.requests[0]
        self.assertEqual(body, b"\x01payload\x00")
        self.assertEqual(header["stdin_len"], len(body))
        self.assertEqual((header["v"], header["spindle"], header["op"], header["cmd"]), (1, "dev", "exec", "true"))
        self.assertIs(header["pty"], False)
        self.assertIs(header["module_runner"], True)
        self.assertIsNone(header["become"])

    def test_module_runner_option_reaches_the_daemon(self) -> None:
        daemon = self.fake(lambda header, body: response({"rc": 0}))
        self.connection({"ansible_spindle_module_runner": False}).exec_command("true")
        self.assertIs(daemon.requests[0][0]["module_runner"], False)

    def test_daemon_closing_mid_response_is_a_connection_failure(self) -> None:
        def truncated(header: dict, body: bytes) -> bytes:
            return response({"rc": 0}, b"0123456789")[:-4]

        self.fake(truncated)
        conn = self.connection()
        with self.assertRaisesRegex(AnsibleConnectionFailure, "spindle daemon died"):
            conn.exec_command("true")

    def test_oversized_response_header_is_refused(self) -> None:
        self.fake(lambda h, b: struct.pack(">I", (1 << 20) + 1) + b"{}")
        conn = self.connection()
        with self.assertRaisesRegex(AnsibleConnectionFailure, "spindle daemon died: response header length"):
            conn.exec_command("true")

    def test_negative_output_length_is_refused(self) -> None:
        raw = json.dumps({"rc": 0, "stdout_len": -1, "stderr_len": 0}).encode()
        self.fake(lambda h, b: struct.pack(">I", len(raw)) + raw)
        conn = self.connection()
        with self.assertRaisesRegex(AnsibleConnectionFailure, "stdout_len"):
            conn.exec_command("true")

    def test_put_and_fetch_send_absolute_local_paths(self) -> None:
        daemon = self.fake()
        conn = self.connection()
        src = os.path.join(self.tmp.name, "src.txt")
        with open(src, "w") as f:
            f.write("x")
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(self.tmp.name)
        conn.put_file("src.txt", "/remote/dst.txt")
        conn.fetch_file("/remote/file", "fetched/file")
        put, fetch = daemon.requests[0][0], daemon.requests[1][0]
        self.assertEqual((put["op"], put["src"], put["dst"], put["become"]), ("put", src, "/remote/dst.txt", None))
        self.assertEqual((fetch["op"], fetch["src"], fetch["dst"]), ("fetch", "/remote/file", os.path.join(self.tmp.name, "fetched/file")))

    def test_put_of_a_missing_file_fails_before_any_request(self) -> None:
        daemon = self.fake()
        conn = self.connection()
        with self.assertRaises(AnsibleFileNotFound):
            conn.put_file(os.path.join(self.tmp.name, "nope"), "/x")
        self.assertEqual(daemon.requests, [])

    def test_socket_name_is_the_contract_hash(self) -> None:
        import hashlib

        conn = self.connection()
        key = os.path.realpath(self.binary) + "\0/agent.sock\0" + self.tmp.name
        want = "ansible-%s.sock" % hashlib.sha256(key.encode()).hexdigest()[:16]
        self.assertEqual(os.path.basename(conn._paths()[1]), want)
        self.assertEqual(conn._paths()[2], conn._paths()[1][: -len(".sock")] + ".log")

    def test_socket_directory_open_to_others_is_refused(self) -> None:
        conn = self.connection()
        directory = os.path.join(self.env["XDG_RUNTIME_DIR"], "spindle")
        os.makedirs(directory, exist_ok=True)
        os.chmod(directory, 0o755)
        with self.assertRaisesRegex(AnsibleError, "refusing to use %s" % directory):
            conn.exec_command("true")

    def test_socket_directory_is_created_private(self) -> None:
        conn = self.connection()
        conn._paths()
        st = os.stat(os.path.join(self.env["XDG_RUNTIME_DIR"], "spindle"))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o700)


class HostOptionsTest(PluginTest):
    def test_ssh_variables_reach_the_host_object(self) -> None:
        daemon = self.fake()
        conn = self.connection(
            {
                "ansible_host": "10.0.0.5",
                "ansible_port": "2222",
                "ansible_user": "deploy",
                "ansible_ssh_pass": LOGIN_PASSWORD,
                "ansible_ssh_private_key_file": "/keys/id",
                "ansible_ssh_common_args": "-o ProxyJump=bastion",
                "ansible_ssh_extra_args": "-o 'User Agent'",
                "ansible_host_key_checking": False,
                "ansible_ssh_timeout": 33,
                "ansible_spindle_via": "admin@bastion:2222,sudo",
                "ansible_spindle_target": "docker:app1",
            }
        )
        conn.exec_command("true")
        host = daemon.requests[0][0]["host"]
        self.assertEqual(
            host,
            {
                "name": "web1",
                "address": "10.0.0.5",
                "port": 2222,
                "user": "deploy",
                "password": LOGIN_PASSWORD,
                "private_key_file": "/keys/id",
                "ssh_args": None,
                "ssh_common_args": "-o ProxyJump=bastion",
                "ssh_extra_args": "-o 'User Agent'",
                "host_key_checking": False,
                "timeout": 33,
                "via": "admin@bastion:2222,sudo",
                "target": "docker:app1",
            },
        )

    def test_unset_options_leave_ssh_defaults_to_the_daemon(self) -> None:
        daemon = self.fake()
        conn = self.connection()
        conn.exec_command("true")
        host = daemon.requests[0][0]["host"]
        self.assertEqual(host["address"], "web1")
        self.assertEqual(host["timeout"], 10)
        for key in ("port", "user", "password", "private_key_file", "via", "target", "host_key_checking"):
            self.assertIsNone(host[key], key)

    def test_delegate_to_names_the_host(self) -> None:
        # Ansible keeps inventory_hostname as the original host's when it
        # delegates; the address and user are the delegate's.
        daemon = self.fake()
        conn = self.connection({"ansible_host": "10.0.0.9"}, task_keys={"delegate_to": "db1"})
        conn.exec_command("true")
        host = daemon.requests[0][0]["host"]
        self.assertEqual((host["name"], host["address"]), ("db1", "10.0.0.9"))

    def test_task_keywords_and_environment(self) -> None:
        daemon = self.fake()
        os.environ["ANSIBLE_SSH_ARGS"] = "-F /etc/ssh/other_config"
        self.addCleanup(os.environ.pop, "ANSIBLE_SSH_ARGS")
        conn = self.connection(task_keys={"remote_user": "kw_user", "port": 2200})
        conn.exec_command("true")
        host = daemon.requests[0][0]["host"]
        self.assertEqual((host["user"], host["port"], host["ssh_args"]), ("kw_user", 2200, "-F /etc/ssh/other_config"))


class BecomeTest(PluginTest):
    def test_native_sudo_records_identity_and_leaves_the_command_bare(self) -> None:
        daemon = self.fake()
        conn = self.connection()
        plugin = self.become(
            conn,
            ansible_become_user="app",
            ansible_become_password=BECOME_PASSWORD,
            ansible_become_flags="-H -S -n -E",
            ansible_become_exe="/usr/local/bin/sudo",
        )
        self.assertIs(conn.become, plugin)
        cmd = self.ansible_command(conn, "/usr/bin/python3")
        self.assertEqual(cmd, "/bin/sh -c '/usr/bin/python3 && sleep 0'")
        conn.exec_command(cmd, in_data=b"payload")
        header, body = daemon.requests[0]
        self.assertEqual(
            header["become"],
            {"method": "sudo", "user": "app", "password": BECOME_PASSWORD, "flags": "-H -S -n -E", "exe": "/usr/local/bin/sudo"},
        )
        self.assertEqual((header["cmd"], body), (cmd, b"payload"))

    def test_become_user_defaults_to_root(self) -> None:
        daemon = self.fake()
        conn = self.connection()
        self.become(conn, "su")
        conn.exec_command(self.ansible_command(conn, "id -u"))
        self.assertEqual(daemon.requests[0][0]["become"]["method"], "su")
        self.assertEqual(daemon.requests[0][0]["become"]["user"], "root")

    def test_wrapped_command_with_quotes_still_routes(self) -> None:
        daemon = self.fake()
        conn = self.connection()
        self.become(conn)
        conn.exec_command(self.ansible_command(conn, "echo 'a b'"))
        self.assertIsNotNone(daemon.requests[0][0]["become"])

    def test_not_sudoable_stays_login_user(self) -> None:
        daemon = self.fake()
        conn = self.connection()
        self.become(conn)
        conn.exec_command(self.ansible_command(conn, "mkdir -p /tmp/x", sudoable=False), sudoable=False)
        # Even a command Ansible did wrap is the login user's when the
        # call says it is not sudoable.
        wrapped = self.ansible_command(conn, "rm -rf /tmp/x")
        conn.exec_command(wrapped, sudoable=False)
        self.assertEqual([h["become"] for h, _ in daemon.requests], [None, None])

    def test_command_without_the_wrapper_output_gets_no_become(self) -> None:
        daemon = self.fake()
        conn = self.connection()
        self.become(conn)
        conn.become.build_become_command("/usr/bin/python3 /tmp/AnsiballZ_ping.py", conn._shell)
        conn.exec_command("/bin/sh -c 'echo other'")
        # The recording is spent by the first exec: it never leaks onward.
        conn.become.build_become_command("whoami", conn._shell)
        conn.exec_command("/bin/sh -c 'whoami && sleep 0'")
        conn.exec_command("/bin/sh -c 'whoami && sleep 0'")
        self.assertEqual([h["become"] is None for h, _ in daemon.requests], [True, False, True])

    def test_no_become_plugin_means_no_become(self) -> None:
        daemon = self.fake()
        conn = self.connection()
        self.become(conn)
        conn.set_become_plugin(None)
        self.assertIsNone(conn.become)
        conn.exec_command(self.ansible_command(conn, "id"))
        self.assertIsNone(daemon.requests[0][0]["become"])

    def test_other_methods_fall_back_to_the_wrapped_command(self) -> None:
        daemon = self.fake()
        conn = self.connection()
        plugin = self.become(conn, "runas", ansible_become_user="Administrator")
        self.assertIsNone(conn._native_method(plugin))
        conn = self.connection({"ansible_spindle_become_native": False})
        self.become(conn, "sudo", ansible_become_user="app")
        cmd = self.ansible_command(conn, "whoami")
        self.assertIn("sudo -H -S -n  -u app", cmd)
        conn.exec_command(cmd)
        header, body = daemon.requests[0]
        self.assertIsNone(header["become"])
        self.assertEqual((header["cmd"], body), (cmd, b""))

    def test_fallback_sudo_gets_the_password_first_and_loses_its_marker(self) -> None:
        def sudo(header: dict, body: bytes) -> bytes:
            prompt = header["cmd"].split('-p "')[1].split('"')[0]
            marker = header["cmd"].split("echo ")[1].split(" ;")[0]
            self.assertEqual(body, BECOME_PASSWORD.encode() + b"\npayload")
            return response({"rc": 0}, b"%s\r\n{\"ok\": 1}\n" % marker.encode(), prompt.encode() + b"warning\n")

        daemon = self.fake(sudo)
        conn = self.connection({"ansible_spindle_become_native": False})
        self.become(conn, ansible_become_password=BECOME_PASSWORD)
        rc, out, err = conn.exec_command(self.ansible_command(conn, "/usr/bin/python3"), in_data=b"payload")
        self.assertEqual((rc, out, err), (0, b'{"ok": 1}\n', b"warning\n"))
        self.assertIsNone(daemon.requests[0][0]["become"])

    def test_fallback_su_reads_the_password_from_stdin(self) -> None:
        def su(header: dict, body: bytes) -> bytes:
            marker = header["cmd"].split("echo ")[1].split(" ;")[0]
            self.assertEqual(body, BECOME_PASSWORD.encode() + b"\n")
            return response({"rc": 0}, marker.encode() + b"\nroot\n", b"Password: warning\n")

        self.fake(su)
        conn = self.connection({"ansible_spindle_become_native": False})
        self.become(conn, "su", ansible_become_password=BECOME_PASSWORD)
        self.assertEqual(conn.exec_command(self.ansible_command(conn, "id -un")), (0, b"root\n", b"warning\n"))

    def test_fallback_sudo_without_S_gets_no_password(self) -> None:
        daemon = self.fake()
        conn = self.connection({"ansible_spindle_become_native": False})
        self.become(conn, ansible_become_password=BECOME_PASSWORD, ansible_become_flags="-H")
        conn.exec_command(self.ansible_command(conn, "id"), in_data=b"payload")
        self.assertEqual(daemon.requests[0][1], b"payload")

    def test_fallback_sudo_wrong_and_missing_password(self) -> None:
        answers = [b"Sorry, try again.\nsudo: 3 incorrect password attempts\n", b"sudo: a password is required\n"]
        self.fake(lambda h, b: response({"rc": 1}, b"", answers.pop(0)))
        conn = self.connection({"ansible_spindle_become_native": False})
        self.become(conn, ansible_become_password=BECOME_PASSWORD)
        with self.assertRaisesRegex(AnsibleError, "^Incorrect sudo password$"):
            conn.exec_command(self.ansible_command(conn, "id"))
        with self.assertRaisesRegex(AnsibleError, "^Missing sudo password$"):
            conn.exec_command(self.ansible_command(conn, "id"))

    def test_fallback_output_after_the_marker_is_the_command_s(self) -> None:
        def ok(header: dict, body: bytes) -> bytes:
            marker = header["cmd"].split("echo ")[1].split(" ;")[0]
            return response({"rc": 1}, marker.encode() + b"\nSorry, try again.\n")

        self.fake(ok)
        conn = self.connection({"ansible_spindle_become_native": False})
        self.become(conn)
        self.assertEqual(conn.exec_command(self.ansible_command(conn, "id")), (1, b"Sorry, try again.\n", b""))

    def test_pipelining(self) -> None:
        conn = self.connection()
        self.assertTrue(conn.is_pipelining_enabled())
        self.assertFalse(conn.is_pipelining_enabled(wrap_async=True))
        plugin = self.become(conn, "su")
        plugin.pipelining = False  # what su says from 2.19 on
        self.assertTrue(conn.is_pipelining_enabled(), "native su pipelines")
        conn = self.connection({"ansible_spindle_become_native": False})
        plugin = self.become(conn, "su")
        plugin.pipelining = False
        self.assertFalse(conn.is_pipelining_enabled())
        conn = self.connection({"ansible_pipelining": False})
        self.assertFalse(conn.is_pipelining_enabled())

    def test_collection_names_map_to_the_method(self) -> None:
        self.connection()

        class Doas:
            name = "community.general.doas"

        self.assertEqual(self.mod.short_become_name(Doas()), "doas")


class ErrorKindTest(PluginTest):
    def setUp(self) -> None:
        super().setUp()
        self.daemon = self.fake()

    def exec_error(self, kind: str, become: bool = True) -> Exception:
        message = "bastion → web1 → sudo:root: it went wrong; do something"
        self.daemon.handler = lambda h, b: response({"error": {"kind": kind, "message": message}})
        conn = self.connection()
        if become:
            self.become(conn, ansible_become_password=BECOME_PASSWORD)
        with self.assertRaises(AnsibleError) as caught:
            conn.exec_command(self.ansible_command(conn, "id"))
        self.assertIn(message, str(caught.exception))
        return caught.exception

    def test_kinds(self) -> None:
        cases = {
            "unreachable": AnsibleConnectionFailure,
            "become_failed": AnsibleConnectionFailure,
            "timeout": AnsibleConnectionFailure,
            "not_found": AnsibleFileNotFound,
            "bad_request": AnsibleError,
            "internal": AnsibleError,
            "something_new": AnsibleError,
        }
        for kind, cls in cases.items():
            with self.subTest(kind=kind):
                e = self.exec_error(kind)
                self.assertIs(type(e), cls)

    def test_become_password_kinds_read_like_ssh(self) -> None:
        e = self.exec_error("become_password_incorrect")
        self.assertIs(type(e), AnsibleError)
        self.assertTrue(str(e).startswith("Incorrect sudo password: "), str(e))
        e = self.exec_error("become_password_missing")
        self.assertTrue(str(e).startswith("Missing sudo password: "), str(e))

    def test_fetch_not_found(self) -> None:
        self.daemon.handler = lambda h, b: response({"error": {"kind": "not_found", "message": "web1: /nope: no such file"}})
        conn = self.connection()
        with self.assertRaisesRegex(AnsibleFileNotFound, "/nope"):
            conn.fetch_file("/nope", os.path.join(self.tmp.name, "x"))


class DaemonStartTest(PluginTest):
    def test_autostart_then_reuse(self) -> None:
        self.addCleanup(self.stop_started_daemon)
        conn = self.connection({"ansible_spindle_idle": "90s"})
        self.assertEqual(conn.exec_command("hostname")[1], b"dev ran hostname")
        self.assertEqual(self.connection().exec_command("true")[1], b"dev ran true")
        starts = self.starts()
        self.assertEqual(len(starts), 1, starts)
        sock = self.socket_path()
        want = "daemon --ansible --socket %s --idle 90s --log %s --ready-fd 3" % (sock, sock[:-5] + ".log")
        self.assertTrue(starts[0].endswith(want), starts[0])

    def test_start_failure_says_what_the_daemon_said(self) -> None:
        with open(os.path.join(self.state, "fail"), "w") as f:
            f.write("cannot listen: permission denied")
        conn = self.connection()
        with self.assertRaisesRegex(AnsibleConnectionFailure, "did not start: cannot listen: permission denied"):
            conn.exec_command("true")

    def test_missing_binary_is_a_clear_error(self) -> None:
        conn = self.connection({"ansible_spindle_path": "spindle-not-installed-here"})
        with self.assertRaisesRegex(AnsibleError, "ansible_spindle_path"):
            conn.exec_command("true")

    def test_version_mismatch_restarts_the_daemon_once(self) -> None:
        self.addCleanup(self.stop_started_daemon)
        with open(os.path.join(self.state, "versions"), "w") as f:
            f.write("1.0\n2.0\n")
        conn = self.connection()
        self.mod.SPINDLE_VERSION = "2.0"
        self.addCleanup(setattr, self.mod, "SPINDLE_VERSION", "dev")
        self.assertEqual(conn.exec_command("true")[1], b"2.0 ran true")
        self.assertEqual(len(self.starts()), 2)

    def test_version_mismatch_after_restart_is_an_error(self) -> None:
        self.addCleanup(self.stop_started_daemon)
        with open(os.path.join(self.state, "versions"), "w") as f:
            f.write("1.0\n")
        conn = self.connection()
        self.mod.SPINDLE_VERSION = "2.0"
        self.addCleanup(setattr, self.mod, "SPINDLE_VERSION", "dev")
        with self.assertRaisesRegex(AnsibleError, "daemon is 1.0, plugin is 2.0"):
            conn.exec_command("true")
        self.assertEqual(len(self.starts()), 2)

    def test_reset_starts_no_daemon(self) -> None:
        conn = self.connection()
        conn.reset()
        self.assertEqual(self.starts(), [])

    def test_reset_names_the_host(self) -> None:
        daemon = self.fake()
        self.connection({"ansible_host": "10.1.1.1"}).reset()
        header = daemon.requests[0][0]
        self.assertEqual((header["op"], header["host"]["address"]), ("reset", "10.1.1.1"))


class SecretsTest(PluginTest):
    def test_no_password_is_displayed(self) -> None:
        outcomes = [
            response({"rc": 0}, b"", b""),
            response({"error": {"kind": "become_password_incorrect", "message": "web1 → sudo:root: wrong password"}}),
            response({"error": {"kind": "unreachable", "message": "web1: auth refused"}}),
        ]
        self.fake(lambda h, b: outcomes.pop(0) if outcomes else response({"rc": 1}, b"", b"Sorry, try again.\n"))
        for native in (True, False):
            conn = self.connection({"ansible_password": LOGIN_PASSWORD, "ansible_spindle_become_native": native})
            self.become(conn, ansible_become_password=BECOME_PASSWORD)
            for _ in range(2 if native else 1):
                try:
                    conn.exec_command(self.ansible_command(conn, "id"), in_data=b"x")
                except AnsibleError as e:
                    self.shown.append(str(e))
            try:
                conn.put_file(__file__, "/tmp/x")
            except AnsibleError as e:
                self.shown.append(str(e))
            conn.reset()
        text = "\n".join(self.shown)
        self.assertIn("EXEC", text)
        self.assertNotIn(LOGIN_PASSWORD, text)
        self.assertNotIn(BECOME_PASSWORD, text)


class ReadResponseTest(unittest.TestCase):
    """read_response gets a response however the socket delivers it."""

    def module(self):
        return sys.modules[type(connection_loader.get("spindle", PlayContext(), os.devnull)).__module__]

    def read(self, response: bytes, piece: int) -> tuple:
        a, b = socket.socketpair()
        self.addCleanup(a.close)
        self.addCleanup(b.close)

        def send() -> None:
            for i in range(0, len(response), piece):
                b.sendall(response[i : i + piece])
            b.shutdown(socket.SHUT_WR)

        t = threading.Thread(target=send)
        t.start()
        try:
            return self.module().read_response(a)
        finally:
            t.join()

    def test_whole_and_in_pieces(self) -> None:
        out, err = os.urandom(300000), b"err"
        head = json.dumps({"rc": 3, "stdout_len": len(out), "stderr_len": len(err)}).encode()
        response = struct.pack(">I", len(head)) + head + out + err
        for piece in (len(response), 1, 7, 65536):
            header, stdout, stderr = self.read(response, piece)
            self.assertEqual((header["rc"], stdout, stderr), (3, out, err), "pieces of %d" % piece)

    def test_cut_short(self) -> None:
        head = json.dumps({"rc": 0, "stdout_len": 10, "stderr_len": 0}).encode()
        with self.assertRaises(self.module().DaemonDied):
            self.read(struct.pack(">I", len(head)) + head + b"12345", 3)


if __name__ == "__main__":
    unittest.main()
