#!/usr/bin/python3
# Reports what the process looks like to a module: what spindle_leak
# leaves behind must not show here.
import atexit
import json
import os
import signal
import sys
import threading

from ansible.module_utils import basic
from ansible.module_utils.basic import AnsibleModule


def main():
    m = AnsibleModule(argument_spec=dict())
    fds = sorted(int(fd) for fd in os.listdir('/proc/self/fd'))
    import __main__
    m.exit_json(
        basic_leak=hasattr(basic, 'SPINDLE_LEAK'),
        json_leak=hasattr(json, 'SPINDLE_LEAK'),
        builtins_leak=hasattr(sys.modules['builtins'], 'SPINDLE_LEAK'),
        path_leak='/spindle-leak' in sys.path,
        env=os.environ.get('SPINDLE_LEAK'),
        cwd=os.getcwd(),
        sigusr1=str(signal.getsignal(signal.SIGUSR1)),
        sigterm=str(signal.getsignal(signal.SIGTERM)),
        sigint=str(signal.getsignal(signal.SIGINT)),
        sigpipe=str(signal.getsignal(signal.SIGPIPE)),
        sigchld=str(signal.getsignal(signal.SIGCHLD)),
        atexit_callbacks=atexit._ncallbacks(),
        threads=sorted(t.name for t in threading.enumerate()),
        fds=fds,
        argv=sys.argv,
        main_file=getattr(__main__, '__file__', None),
        main_keys=sorted(vars(__main__)),
        basic_file=os.path.basename(basic.__file__),
        stdio=[(f.seekable(), f.line_buffering, f.encoding, f.errors) for f in (sys.stdin, sys.stdout, sys.stderr)],
    )


if __name__ == '__main__':
    main()
