#!/usr/bin/python3
# Reports who runs the module: its user and its parent's command line
# (a shell, or the warm module runner).
import os

from ansible.module_utils.basic import AnsibleModule


def main():
    m = AnsibleModule(argument_spec=dict())
    with open('/proc/%d/cmdline' % os.getppid(), 'rb') as f:
        parent = f.read().split(b'\0')
    m.exit_json(uid=os.getuid(), runner=b'The warm module runner' in b' '.join(parent))


if __name__ == '__main__':
    main()
