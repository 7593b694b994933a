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

try:
    from ansible.plugins.loader import init_plugin_loader
except ImportError:
    pass  # 2.14: the loader needs no start
else:
    init_plugin_loader()

name, args, interp = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
if os.path.isabs(name):
    path, name = name, os.path.splitext(os.path.basename(name))[0]
else:
    path = module_loader.find_plugin(name, mod_type='.py')
kwargs = dict(module_name=name, module_path=path, module_args=args, templar=Templar(loader=DataLoader()),
              task_vars={'ansible_python_interpreter': interp}, module_compression='ZIP_DEFLATED')
try:
    built = module_common.modify_module(**kwargs)
except TypeError:
    built = None  # 2.18 and older take positional arguments
if built is None:
    data, style, shebang = module_common.modify_module(*(kwargs.pop(k) for k in ('module_name', 'module_path', 'module_args', 'templar')), **kwargs)
elif isinstance(built, tuple):
    data, style, shebang = built[:3]
else:
    data, style, shebang = built.b_module_data, built.module_style, built.shebang
if style != 'new':
    raise SystemExit('%s is a %s-style module, not an AnsiballZ one' % (name, style))
sys.stdout.buffer.write(data)
