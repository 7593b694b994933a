#!/usr/bin/python3
# A module that fails without a result: an exception escapes it.
from ansible.module_utils.basic import AnsibleModule


def main():
    AnsibleModule(argument_spec=dict())
    raise RuntimeError('boom')


if __name__ == '__main__':
    main()
