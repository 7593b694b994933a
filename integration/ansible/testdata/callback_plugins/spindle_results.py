# A callback plugin of Spindle's Ansible tests: one JSON line per task
# result (and per unreachable host) in the file named by
# $SPINDLE_TEST_RESULTS, so the Go test can compare a playbook's results
# under two connection plugins. Standard library only: it must load in
# every controller (ansible-core 2.14 to the newest) unchanged.
from __future__ import annotations

import json
import os

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = '''
name: spindle_results
type: aggregate
short_description: per-task results as JSON lines, for Spindle's tests
description:
  - Appends one JSON object per task result to $SPINDLE_TEST_RESULTS.
'''


def _text(v):
    if v is None:
        return None
    if isinstance(v, bytes):
        return v.decode('utf-8', 'replace')
    return str(v)


def _fields(status, r):
    rec = {'status': status}
    if status == 'ok' and r.get('changed'):
        rec['status'] = 'changed'
    if 'rc' in r:
        rec['rc'] = r['rc']
    if 'stdout' in r:
        rec['stdout'] = _text(r['stdout'])
    if status in ('failed', 'unreachable') and 'msg' in r:
        rec['msg'] = _text(r['msg'])
    return rec


def _item_status(r):
    if r.get('unreachable'):
        return 'unreachable'
    if r.get('failed'):
        return 'failed'
    if r.get('skipped'):
        return 'skipped'
    return 'ok'


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'spindle_results'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._path = os.environ.get('SPINDLE_TEST_RESULTS')
        self._play = ''

    def _write(self, rec):
        if not self._path:
            return
        with open(self._path, 'a') as f:
            f.write(json.dumps(rec, sort_keys=True) + '\n')

    def _record(self, status, result, ignored=False):
        r = result._result
        rec = _fields(status, r)
        rec['play'] = self._play
        rec['host'] = result._host.get_name()
        rec['task'] = result._task.get_name()
        if ignored:
            rec['ignored'] = True
        if isinstance(r.get('results'), list):
            rec['items'] = [_fields(_item_status(i), i) for i in r['results'] if isinstance(i, dict)]
        self._write(rec)

    def v2_playbook_on_play_start(self, play):
        self._play = play.get_name()

    def v2_runner_on_ok(self, result):
        self._record('ok', result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record('failed', result, ignored=ignore_errors)

    def v2_runner_on_unreachable(self, result):
        self._record('unreachable', result)

    def v2_runner_on_skipped(self, result):
        self._record('skipped', result)
