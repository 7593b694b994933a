# spindle-bench's hot-path driver: times exec_command("true") through a
# connection plugin the way Ansible's workers call it, a new connection
# object per call (get from the loader, set_options, exec_command,
# close), against whatever the plugin keeps warm between calls.
#
# usage: python3 hotpath.py PLUGIN N VARS_JSON
# PLUGIN is a connection plugin's name (ANSIBLE_CONNECTION_PLUGINS finds
# the bench's); VARS_JSON the host's variables, as an inventory gives
# them. Prints one JSON object: {"ns_per_call": ..., "calls": N, and the
# call's phases, ns each: "setup_ns" (loader and set_options), "exec_ns"
# (exec_command), "close_ns"}.
#
# With SPINDLE_BENCH_IPC_FLOOR=SOCKET set, exec_command is replaced by
# one round trip on that Unix socket (a request the size of an exec's,
# length-prefixed, and a length-prefixed answer) to the bench, which runs
# the command through the library meanwhile: what any plugin that hands
# its call to another process pays, Ansible's connection object and
# set_options included.
from __future__ import absolute_import, division, print_function

import inspect
import json
import os
import socket
import struct
import sys
import time

from ansible.playbook.play_context import PlayContext
from ansible.plugins.connection import ConnectionBase
from ansible.plugins.loader import connection_loader

# new_stdin is a positional parameter up to ansible-core 2.19 and gone
# after; Ansible's TaskExecutor passes what the version takes.
_NEEDS_STDIN = "new_stdin" in inspect.signature(ConnectionBase.__init__).parameters


IPC_FLOOR = os.environ.get("SPINDLE_BENCH_IPC_FLOOR")


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise SystemExit("the IPC floor's server hung up")
        out += chunk
    return out


def ipc_round_trip(path, request):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        s.sendall(request)
        (n,) = struct.unpack(">I", recv_exact(s, 4))
        recv_exact(s, n)
    finally:
        s.close()
    return 0, b"", b""


def one_call(name, host_vars, pid, phases):
    t0 = time.perf_counter_ns()
    pc = PlayContext()
    pc.remote_addr = host_vars.get("ansible_host")
    pc.port = host_vars.get("ansible_port")
    pc.remote_user = host_vars.get("ansible_user")
    args = (None,) if _NEEDS_STDIN else ()
    conn = connection_loader.get(name, pc, *args, ansible_playbook_pid=pid)
    if conn is None:
        raise SystemExit("no connection plugin named %r (ANSIBLE_CONNECTION_PLUGINS=%s)"
                         % (name, os.environ.get("ANSIBLE_CONNECTION_PLUGINS", "")))
    conn.set_options(var_options=host_vars)
    t1 = time.perf_counter_ns()
    try:
        if IPC_FLOOR:
            rc, out, err = ipc_round_trip(IPC_FLOOR, _FLOOR_REQUEST[0])
        else:
            rc, out, err = conn.exec_command("true", in_data=None, sudoable=True)
        t2 = time.perf_counter_ns()
    finally:
        conn.close()
    t3 = time.perf_counter_ns()
    phases[0] += t1 - t0
    phases[1] += t2 - t1
    phases[2] += t3 - t2
    if rc != 0:
        raise SystemExit("true through %s exited %d: %r" % (name, rc, err))


_FLOOR_REQUEST = [b""]


def main(argv):
    if len(argv) != 4:
        raise SystemExit("usage: hotpath.py PLUGIN N VARS_JSON")
    name, n, host_vars = argv[1], int(argv[2]), json.loads(argv[3])
    head = json.dumps({"v": 1, "op": "exec", "host": host_vars, "cmd": "true", "pty": False}).encode()
    _FLOOR_REQUEST[0] = struct.pack(">I", len(head)) + head
    pid = os.getpid()
    one_call(name, host_vars, pid, [0, 0, 0])  # warm: the daemon, the master, imports
    phases = [0, 0, 0]
    t0 = time.perf_counter_ns()
    for _ in range(n):
        one_call(name, host_vars, pid, phases)
    ns = (time.perf_counter_ns() - t0) / n
    print(json.dumps({"ns_per_call": ns, "calls": n, "setup_ns": phases[0] / n,
                      "exec_ns": phases[1] / n, "close_ns": phases[2] / n}))


if __name__ == "__main__":
    main(sys.argv)
