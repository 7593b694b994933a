#!/usr/bin/python3
# A module that relies on what the interpreter does at exit: a file left
# open with its write still buffered, an atexit hook, a thread the exit
# waits for, all writing to a file, and an exit status from sys.exit
# with a message.
import atexit
import sys
import threading

from ansible.module_utils.basic import AnsibleModule


def main():
    m = AnsibleModule(argument_spec=dict(path=dict(type='path', required=True)))
    path = m.params['path']
    global LEFT_OPEN
    LEFT_OPEN = open(path + '.buffered', 'w')
    LEFT_OPEN.write('flushed at exit\n')
    go = threading.Event()

    def late():
        go.wait()
        with open(path + '.thread', 'w') as f:
            f.write('joined at exit\n')
    threading.Thread(target=late).start()

    def hook():
        with open(path + '.atexit', 'w') as f:
            f.write('atexit ran\n')
        print('atexit output')
    atexit.register(hook)
    print('{"changed": false, "msg": "before exit"}')
    go.set()
    sys.exit('exit message')


if __name__ == '__main__':
    main()
