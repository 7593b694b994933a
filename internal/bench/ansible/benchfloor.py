# -*- coding: utf-8 -*-
# spindle-bench's floor for Ansible: a connection plugin that runs nothing.
# Every command gets the answer a healthy target would give, at once, so
# a playbook run through it costs only what Ansible itself spends per
# task (templating, building the AnsiballZ payload, forking a worker,
# callbacks). Standard library and ansible-core only.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = """
    name: benchfloor
    short_description: answers every command at once without running it
    description:
        - spindle-bench's floor. Modules get a canned result valid for what
          the bench playbooks use (command, shell, stat, file, copy,
          template); temp-dir and home-dir commands get the answer a POSIX
          target gives.
    author: Spindle
    options:
      pipelining:
        description: Pipelined modules, as Spindle forces them on.
        type: boolean
        default: true
        vars:
          - name: ansible_pipelining
"""

import json
import re

from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display

display = Display()

# The home the floor reports for `echo ~` and the temp dirs' parent.
FLOOR_HOME = "/nonexistent/benchfloor"

# mkdtemp's command ends with `echo ansible-tmp-NAME=` and a subshell that
# prints the new directory.
_MKDTEMP = re.compile(r"echo (ansible-tmp-[A-Za-z0-9_.-]+)=")
_ECHO_HOME = re.compile(r"echo ~([A-Za-z0-9_.-]*) ")
_ECHO_PWD = re.compile(r"echo \"`pwd`\"")
# A module's name, in the AnsiballZ wrapper (pipelined, every version
# names it outside the zip) or in the uploaded file's name.
_MODULE = re.compile(r"ansible[._]modules[._]([A-Za-z0-9_]+)|AnsiballZ_([A-Za-z0-9_]+)\.py")

_RESULTS = {
    "command": {"changed": False, "rc": 0, "stdout": "", "stderr": "", "stdout_lines": [], "stderr_lines": []},
    "stat": {"changed": False, "stat": {"exists": False}},
    "file": {"changed": False, "state": "directory"},
    "copy": {"changed": False},
}


def module_name(cmd, in_data):
    """The module a command runs, or None when it runs none."""
    for text in (in_data, cmd):
        if not text:
            continue
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        m = _MODULE.search(text)
        if m:
            return m.group(1) or m.group(2)
    return None


def answer(cmd, in_data=None):
    """(rc, stdout, stderr) a healthy target would give for cmd, as bytes."""
    if isinstance(cmd, bytes):
        cmd = cmd.decode("utf-8", "replace")
    mod = module_name(cmd, in_data)
    if mod is not None:
        res = dict(_RESULTS.get(mod, {"changed": False}))
        res["invocation"] = {"module_args": {}}
        return 0, json.dumps(res).encode(), b""
    m = _MKDTEMP.search(cmd)
    if m:
        name = m.group(1)
        return 0, ("%s=%s/.ansible/tmp/%s\n" % (name, FLOOR_HOME, name)).encode(), b""
    m = _ECHO_HOME.search(cmd)
    if m:
        home = FLOOR_HOME if not m.group(1) else "/nonexistent/" + m.group(1)
        return 0, (home + "\n").encode(), b""
    if _ECHO_PWD.search(cmd):
        return 0, (FLOOR_HOME + "\n").encode(), b""
    return 0, b"", b""


class Connection(ConnectionBase):
    """Answers every command without running it."""

    transport = "benchfloor"
    has_pipelining = True

    def __init__(self, play_context, *args, **kwargs):
        super(Connection, self).__init__(play_context, *args, **kwargs)

    def _connect(self):
        self._connected = True
        return self

    def exec_command(self, cmd, in_data=None, sudoable=True):
        super(Connection, self).exec_command(cmd, in_data=in_data, sudoable=sudoable)
        display.vvv(u"FLOOR EXEC %s (stdin %d bytes)" % (cmd, len(in_data or b"")), host=self._play_context.remote_addr)
        return answer(cmd, in_data)

    def put_file(self, in_path, out_path):
        super(Connection, self).put_file(in_path, out_path)
        display.vvv(u"FLOOR PUT %s TO %s" % (in_path, out_path), host=self._play_context.remote_addr)

    def fetch_file(self, in_path, out_path):
        super(Connection, self).fetch_file(in_path, out_path)
        with open(out_path, "wb"):
            pass

    def close(self):
        self._connected = False
