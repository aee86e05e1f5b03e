# stackflow's stdout callback: one JSON document at the end of the run, in the shape of the usual json
# callback ({"plays": [{"play": …, "tasks": [{"task": …, "hosts": {host: result}}]}], "stats": {host: …}}),
# which the worker parses to tell an unreachable host from a failed task. Shipped with the playbooks
# because Debian's ansible-core has no JSON callback without the ansible.posix collection.
from __future__ import annotations

import datetime
import json

from ansible.parsing.ajson import AnsibleJSONEncoder
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = '''
    name: stackflow_json
    type: stdout
    short_description: one JSON document with every task result and the per-host stats
    description: Used by stackflow's worker to classify playbook runs.
'''


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'stdout'
    CALLBACK_NAME = 'stackflow_json'

    def __init__(self, display=None):
        super().__init__(display)
        self.results = []

    def _new_play(self, play):
        return {'play': {'name': play.get_name(), 'id': str(play._uuid), 'duration': {'start': _now()}}, 'tasks': []}

    def _new_task(self, task):
        return {'task': {'name': task.get_name(), 'id': str(task._uuid), 'duration': {'start': _now()}}, 'hosts': {}}

    def v2_playbook_on_play_start(self, play):
        self.results.append(self._new_play(play))

    def v2_playbook_on_task_start(self, task, is_conditional):
        self.results[-1]['tasks'].append(self._new_task(task))

    def v2_playbook_on_handler_task_start(self, task):
        self.results[-1]['tasks'].append(self._new_task(task))

    def _record(self, result, **flags):
        host = result._host.get_name()
        res = dict(result._result)
        res['action'] = result._task.action
        res.update(flags)
        tasks = self.results[-1]['tasks'] if self.results else []
        if not tasks or tasks[-1]['task']['id'] != str(result._task._uuid):
            # A result for a task whose start we did not see (e.g. an include); keep it anyway.
            tasks.append(self._new_task(result._task))
        tasks[-1]['hosts'][host] = res
        tasks[-1]['task']['duration']['end'] = _now()

    def v2_runner_on_ok(self, result, **kwargs):
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False, **kwargs):
        self._record(result, failed=True)

    def v2_runner_on_unreachable(self, result, **kwargs):
        self._record(result, unreachable=True)

    def v2_runner_on_skipped(self, result, **kwargs):
        self._record(result, skipped=True)

    def v2_playbook_on_stats(self, stats):
        hosts = sorted(stats.processed.keys())
        summary = {}
        for h in hosts:
            s = stats.summarize(h)
            summary[h] = {k: s.get(k, 0) for k in ('ok', 'changed', 'failures', 'unreachable', 'skipped', 'rescued', 'ignored')}
        for play in self.results:
            play['play']['duration']['end'] = _now()
        self._display.display(json.dumps({'plays': self.results, 'stats': summary}, cls=AnsibleJSONEncoder, indent=2, sort_keys=True))
