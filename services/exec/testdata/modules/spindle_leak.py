#!/usr/bin/python3
# A module that leaves behind everything a module can: a global in a
# module every module imports, an environment variable, a working
# directory, a signal handler, an atexit hook, a running thread and an
# open file. The isolation test runs spindle_report after it.
import atexit
import json
import os
import signal
import sys
import threading
import time

from ansible.module_utils import basic
from ansible.module_utils.basic import AnsibleModule


def main():
    m = AnsibleModule(argument_spec=dict(mark=dict(type='path', required=True)))
    mark = m.params['mark']
    basic.SPINDLE_LEAK = True
    json.SPINDLE_LEAK = True
    sys.modules['builtins'].SPINDLE_LEAK = True
    sys.path.append('/spindle-leak')
    os.environ['SPINDLE_LEAK'] = '1'
    os.chdir('/')
    signal.signal(signal.SIGUSR1, lambda *a: None)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def hook():
        with open(mark, 'a') as f:
            f.write('atexit %d\n' % os.getpid())
    atexit.register(hook)
    t = threading.Thread(target=time.sleep, args=(3600,), name='spindle-leak', daemon=True)
    t.start()
    global LEAKED_FILE
    LEAKED_FILE = open(mark)
    m.exit_json(changed=True, pid=os.getpid())


if __name__ == '__main__':
    main()
