# Writes to stdout the pipelined AnsiballZ payload that ansible-core
# (the one this interpreter imports) builds for a module:
#   mkpayload.py NAME_OR_PATH ARGS_JSON INTERPRETER
import json
import os
import sys

from ansible.executor import module_common
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import module_loader
from ansible.template import Templar

name, args, interp = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
if os.path.isabs(name):
    path, name = name, os.path.splitext(os.path.basename(name))[0]
else:
    path = module_loader.find_plugin(name, mod_type='.py')
data, style, shebang = module_common.modify_module(
    name, path, args, Templar(loader=DataLoader()),
    task_vars={'ansible_python_interpreter': interp},
    module_compression='ZIP_DEFLATED')
if style != 'new':
    raise SystemExit('%s is a %s-style module, not an AnsiballZ one' % (name, style))
sys.stdout.buffer.write(data)
