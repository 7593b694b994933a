# The warm module runner: started by a spindle agent as
#   INTERPRETER -c <this script> ZIP [CODE_CACHE]
# with a SOCK_SEQPACKET socket on fd 3. It imports what an AnsiballZ
# module needs once (the standard library and ansible.module_utils from
# ZIP), then forks once per module run. Each child becomes what a fresh
# "INTERPRETER" reading its script from stdin would be, runs the script
# and exits as the interpreter would (fast_exit), so nothing a module
# does reaches the next one. Standard library only; Python 3.6 and later.
import sys

if sys.version_info < (3, 6):
    raise SystemExit("unsupported: Python %d.%d is older than 3.6" % sys.version_info[:2])

import os

FRESH_PATH = list(sys.path)
FRESH_ARGV = ['']

import atexit
import builtins
import errno
import io
import json
import select
import signal
import socket
import struct
import types
import weakref
try:
    # What importlib.abc.SourceLoader adds is abstract classes, whose
    # import (importlib.resources) is a tenth of a runner's start.
    from importlib._bootstrap_external import SourceLoader
except ImportError:
    from importlib.abc import SourceLoader
from importlib.machinery import PathFinder
from importlib.util import spec_from_file_location

CTL_FD = 3
PR_SET_PDEATHSIG = 1
RUNNER_PID = os.getpid()
try:
    import ctypes
    PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except Exception:
    PRCTL = None
MAX_MSG = 1 << 20


def send(sock, obj):
    sock.send(json.dumps(obj).encode('utf-8'))


# Compiled code of the zip's sources not imported by preload (the module
# itself, module_utils it imports later), by source: a child finds its
# module's code here instead of compiling it (twice, with zipimport)
# when the source is the same. Python 3.8 and later (code.replace).
CODE = {}


# Standard library modules that AnsiballZ wrappers (2.14 to 2.2x) and
# common modules import at run time, beyond what module_utils.basic
# imports: each costs a child a lookup on disk and a load.
STDLIB_PRELOAD = ('base64', 'glob', 'pkgutil', 'runpy', 'shutil', 'tempfile', 'zipfile',
                  'importlib.util', 'datetime', 'hashlib', 'grp', 'pwd')


class CodeCache(object):
    """Compiled code of a zip's sources by the sha256 of their source,
    kept between runners in a file of the agent's private cache
    directory, as Python keeps a module's in __pycache__: compiling
    module_utils is most of a runner's start (42 of 57 ms here). Code
    from the file gets the filename of the source it stands for."""

    MAX_FILES = 16  # files kept in the directory, the most recent

    def __init__(self, path):
        import importlib.util
        self.path = path
        self.header = b'spindle-pycode-1\0' + importlib.util.MAGIC_NUMBER
        self.codes, self.used, self.hits, self.misses = {}, {}, 0, 0
        if not path:
            return
        try:
            with io.open(path, 'rb') as f:
                data = f.read()
            if data.startswith(self.header):
                import marshal
                codes = marshal.loads(data[len(self.header):])
                if isinstance(codes, dict):
                    self.codes = codes
        except Exception:
            pass  # none yet, or unreadable: compiled and written again

    def compile(self, source, filename):
        import hashlib
        import marshal
        key = hashlib.sha256(source).hexdigest()
        data = self.codes.get(key)
        code = None
        if isinstance(data, bytes):
            try:
                code = marshal.loads(data)  # a code object of its own: sources repeat (empty packages)
            except Exception:
                pass
        if isinstance(code, types.CodeType):
            self.hits += 1
            fix_filename(code, filename)
        else:
            self.misses += 1
            code = compile(source, filename, 'exec', dont_inherit=True)
            data = marshal.dumps(code)
        self.used[key] = data
        return code

    def save(self):
        """Writes the code used, if some was compiled (one file per
        family and interpreter; the oldest past MAX_FILES removed)."""
        if not self.path or not self.misses:
            return
        import marshal
        directory = os.path.dirname(self.path)
        tmp = '%s.%d.tmp' % (self.path, os.getpid())
        try:
            os.makedirs(directory, 0o700, exist_ok=True)
            with io.open(tmp, 'wb') as f:
                f.write(self.header + marshal.dumps(self.used))
            os.rename(tmp, self.path)
            names = [os.path.join(directory, n) for n in os.listdir(directory) if n.endswith('.marshal')]
            names.sort(key=lambda n: os.stat(n).st_mtime, reverse=True)
            for old in names[self.MAX_FILES:]:
                os.unlink(old)
        except Exception:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def fix_filename(code, filename):
    """Gives code, compiled from the same source under another path,
    filename (as importlib does for a module's cached bytecode)."""
    try:
        import _imp
        _imp._fix_co_filename(code, filename)
    except (ImportError, AttributeError):
        pass


def preload(zip_path, cache_path=None):
    """Imports ansible.module_utils.basic (and what it imports) from
    zip_path, and compiles the zip's other sources, with the code cached
    at cache_path where it holds them; imports STDLIB_PRELOAD and finds
    the temporary directory, as every run's wrapper would (the runner's
    environment is its runs'). Returns the modules imported and the
    cache."""
    import importlib
    for name in STDLIB_PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    import tempfile
    try:
        # Found once here rather than by a test file's write in each
        # run; the runner's environment (TMPDIR) is its runs'.
        tempfile.gettempdir()
    except Exception:
        pass
    cache = CodeCache(cache_path)
    import zipimport
    zip_compile = getattr(zipimport, '_compile_source', None)  # Python 3.8 and later
    if zip_compile is not None:
        def cached_compile(pathname, source):
            return cache.compile(source.replace(b'\r\n', b'\n').replace(b'\r', b'\n'), pathname)
        zipimport._compile_source = cached_compile
    sys.path.insert(0, zip_path)
    try:
        import ansible.module_utils.basic  # noqa: F401
    finally:
        sys.path[:] = FRESH_PATH
        sys.path_importer_cache.pop(zip_path, None)
        if zip_compile is not None:
            zipimport._compile_source = zip_compile
    loaded = sorted(n for n in sys.modules if n == 'ansible' or n.startswith('ansible.'))
    if hasattr(types.CodeType, 'replace'):
        import zipfile
        imported = set(getattr(sys.modules[n], '__file__', None) for n in loaded)
        with zipfile.ZipFile(zip_path) as z:
            for name in z.namelist():
                path = os.path.join(zip_path, name)
                if name.startswith('ansible/') and name.endswith('.py') and path not in imported:
                    src = z.read(name)
                    try:
                        CODE[src] = cache.compile(src, path)
                    except SyntaxError:
                        pass  # the child gets the error itself
    cache.save()
    return loaded, cache


def with_filename(code, filename):
    consts = tuple(with_filename(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


class CachedLoader(SourceLoader):
    """Loads a zip's source whose compiled code the runner holds."""

    def __init__(self, zip_path, name, path, source):
        self.zip_path, self.name, self.path, self.source = zip_path, name, path, source

    def get_filename(self, fullname):
        return self.path

    def get_data(self, path):
        if path == self.path:
            return self.source
        prefix = self.zip_path + os.sep
        if not path.startswith(prefix):
            raise OSError(errno.ENOENT, 'not in %s' % self.zip_path, path)
        try:
            return open_zip(self.zip_path).read(path[len(prefix):])
        except KeyError:
            raise OSError(errno.ENOENT, 'not in %s' % self.zip_path, path)

    def source_to_code(self, data, path, *args, **kwargs):
        return with_filename(CODE[self.source], path)


# The zip files a run looked into, by path, read into memory: the
# module's zip is looked into once per module it imports, and a zip's
# directory is read on each opening. Kept in memory, not open, so that
# a run has the file descriptors a fresh interpreter would.
ZIPS = {}


def open_zip(entry):
    import zipfile
    z = ZIPS.get(entry)
    if z is None:
        with REAL_OPEN(entry, 'rb') as f:
            z = ZIPS[entry] = zipfile.ZipFile(io.BytesIO(f.read()))
    return z


def zip_source(entry, parts, package):
    """The source of module parts (a package if package) in the zip file
    entry, and its path, or None."""
    import zipfile
    name = '/'.join(parts) + ('/__init__.py' if package else '.py')
    try:
        return open_zip(entry).read(name), os.path.join(entry, name)
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


class CurrentZipFinder(object):
    """Finds the ansible.* modules not yet imported where a fresh
    interpreter would: under the first sys.path entry that holds the
    ansible package (the module's own zip, which the wrapper puts first),
    not under the preloaded package's __path__."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith('ansible.'):
            return None
        if CODE and sys.path:
            spec = self.first_zip_spec(fullname, sys.path[0])
            if spec is not None:
                return spec
        spec = PathFinder.find_spec('ansible', sys.path)
        if spec is None or not spec.submodule_search_locations:
            return None
        parts = fullname.split('.')
        for i in range(1, len(parts)):
            locations = list(spec.submodule_search_locations)
            if i == len(parts) - 1 and CODE:
                cached = self.cached_spec(fullname, parts, spec.origin)
                if cached is not None:
                    return cached
            spec = PathFinder.find_spec('.'.join(parts[:i + 1]), locations)
            if spec is None:
                return None
            if i < len(parts) - 1 and not spec.submodule_search_locations:
                return None
        return spec

    def first_zip_spec(self, fullname, entry):
        """compiled_spec for fullname in entry, found without the path
        finders, when entry (the first on sys.path: where the wrapper
        puts the module's zip) is a zip file that holds the ansible
        package and the packages on fullname's way, where they would
        find it; else None."""
        import zipfile
        try:
            names = open_zip(entry).NameToInfo
        except (OSError, zipfile.BadZipFile):
            return None  # no zip file there: the path finders say what is
        parts = fullname.split('.')
        for i in range(1, len(parts)):
            if '/'.join(parts[:i]) + '/__init__.py' not in names:
                return None
        return compiled_spec(fullname, entry, parts)

    def cached_spec(self, fullname, parts, parent_origin):
        """compiled_spec for fullname, when its parent package (found by
        the path finders) is in a zip file."""
        suffix = os.sep + os.path.join(*parts[:-1]) + os.sep + '__init__.py'
        if not parent_origin or not parent_origin.endswith(suffix):
            return None
        entry = parent_origin[:-len(suffix)]
        if not os.path.isfile(entry):
            return None
        return compiled_spec(fullname, entry, parts)


def compiled_spec(fullname, entry, parts):
    """A spec for module fullname (parts) in the zip file entry, with
    the runner's compiled code, when its source there is one the runner
    compiled; else None."""
    for package in (True, False):
        found = zip_source(entry, parts, package)
        if found is not None:
            break
    else:
        return None
    source, path = found
    if source not in CODE:
        return None
    loader = CachedLoader(entry, fullname, path, source)
    return spec_from_file_location(fullname, path, loader=loader,
                                   submodule_search_locations=[os.path.dirname(path)] if package else None)


# The files a run opened (weak references), for its exit to flush.
OPENED = []
REAL_OPEN = io.open


def tracking_open(*args, **kwargs):
    f = REAL_OPEN(*args, **kwargs)
    try:
        OPENED.append(weakref.ref(f))
    except TypeError:
        pass
    return f


def exit_status(e):
    """The status the interpreter exits with for SystemExit e."""
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xff
    try:
        sys.stderr.write('%s\n' % (code,))
    except Exception:
        pass
    return 1


def fast_exit(status):
    """Ends a run as the interpreter's exit would, in the order it does it
    (threads joined, atexit, files flushed), without the teardown of
    every module and object: in a fork that touches the whole heap and
    copies every page, which took longer than the module's own run.
    Files the run opened and left open are flushed, as their teardown
    would have done."""
    try:
        threading = sys.modules.get('threading')
        if threading is not None:
            threading._shutdown()
    except BaseException:
        pass
    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    for ref in OPENED:
        f = ref()
        if f is not None:
            try:
                if not f.closed:
                    f.flush()
            except BaseException:
                pass
    for f in (sys.stdout, sys.stderr):
        try:
            if f is not None:
                f.flush()
        except BaseException:
            if status == 0:
                status = 120  # as the interpreter: output it could not flush
    report_status(status)
    os._exit(status)


# Where a run reports its own status before its teardown
# (report_status): a datagram socket of the runner's in the abstract
# namespace, whose sender the runner knows from the kernel's
# credentials. None where there is none (the runner reports every
# status after its waitpid).
STATUS_ADDR = None


def status_socket():
    """The runner's socket for its runs' early statuses, or None."""
    global STATUS_ADDR
    if not hasattr(socket, 'SO_PASSCRED'):
        return None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        addr = b'\0spindle-pyrunner-' + os.urandom(16).hex().encode()
        s.bind(addr)
    except OSError:
        s.close()
        return None
    s.set_inheritable(False)
    s.setblocking(False)
    STATUS_ADDR = addr
    return s


def report_status(status):
    """Closes the run's standard streams and tells the runner the run's
    exit status before the process is torn down: the teardown of a
    fork's address space takes as long as a small module's run, and its
    end (the runner's waitpid) is what the agent would otherwise wait
    for."""
    for fd in (0, 1, 2):
        try:
            os.close(fd)
        except OSError:
            pass
    if STATUS_ADDR is None:
        return
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            s.sendto(str((status & 0xff) << 8).encode(), STATUS_ADDR)
        finally:
            s.close()
    except Exception:
        pass  # the runner reports it after its waitpid


def early_statuses(status_sock, children, reported):
    """The statuses the runs in children reported on status_sock, as
    (pid, status): the pid is the sender's, as the kernel gives it."""
    creds = struct.calcsize('3i')
    out = []
    while True:
        try:
            msg, anc, _, _ = status_sock.recvmsg(64, socket.CMSG_SPACE(creds))
        except (BlockingIOError, InterruptedError):
            return out
        pid = None
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= creds:
                pid = struct.unpack('3i', data[:creds])[0]
        try:
            status = int(msg)
        except ValueError:
            continue
        if pid in children and pid not in reported:
            reported.add(pid)
            out.append((pid, status))


def run_child(owned, fds, env, cwd, z):
    """A run forked for its request: it never returns."""
    def run():
        prepare(owned)
        begin(fds, env, cwd)
        run_script(z)
    exit_as_interpreter(run)


def exit_as_interpreter(run):
    """Calls run, a fork's whole run, and ends the process as the
    interpreter would have ended for what it raised."""
    status = 1
    try:
        run()
    except SystemExit as e:
        status = exit_status(e)
    except BaseException:
        pass
    fast_exit(status)


def run_spare(owned, sock, notify):
    """A run forked ahead of its request, which it reads from the agent's
    socket itself while the runner leaves that socket to it: it tells
    the runner on notify that it took a request (and the zip it needs),
    then answers the agent. It never returns."""
    def run():
        prepare(owned)
        populate(sock)
        msg, fds = receive(sock)
        if not msg:
            os._exit(0)  # the agent is gone: the runner sees it next
        try:
            rid, env, cwd, z = parse_request(msg, fds)
        except Exception as e:
            refuse(sock, fds, None, 'bad request: %s' % e)
            os._exit(0)  # never a run
        if z is not None:
            try:
                load_zip(z[0], z[1])
            except Exception as e:
                refuse(sock, fds, rid, 'zip %s: %s' % (z[1], e))
                os._exit(0)
        # Before the answer, so that the runner counts the run before it
        # can end; the zip, for the runner to hold for the next ones.
        os.write(notify, ('took\n%s\n%s' % (z[0], z[1]) if z is not None else 'took').encode())
        os.close(notify)
        send(sock, {'id': rid, 'pid': os.getpid(), 'ahead': True})
        sock.close()
        begin(fds, env, cwd)
        run_script(z)
    exit_as_interpreter(run)


MADV_POPULATE_WRITE = 23  # Linux 5.14 and later
POPULATE_SLICE = 1 << 20


def populate(channel):
    """Makes the fork's own copy of the runner's writable memory while
    it waits, a slice at a time until its request comes: a run writes
    to pages all over the heap (reference counts), and each first write
    to a page shared with the runner costs a fault and a copy, some
    1,500 of them for a command module."""
    try:
        import ctypes
        madvise = ctypes.CDLL(None, use_errno=True).madvise
        madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        with REAL_OPEN('/proc/self/maps') as f:
            maps = f.read().splitlines()
    except Exception:
        return
    for line in maps:
        fields = line.split()
        if len(fields) < 5 or not fields[1].startswith('rw') or fields[1][3] != 'p':
            continue
        if len(fields) > 5 and fields[5].startswith('[') and fields[5] != '[heap]':
            continue  # the stack, vvar and the like
        start, end = (int(x, 16) for x in fields[0].split('-'))
        while start < end:
            if select.select([channel], [], [], 0)[0]:
                return  # the request came first
            n = min(POPULATE_SLICE, end - start)
            if madvise(start, n, MADV_POPULATE_WRITE) != 0 and ctypes.get_errno() == errno.EINVAL:
                return  # a kernel without it
            start += n


def prepare(owned):
    """What makes a fork a fresh interpreter whatever its request."""
    os.setpgid(0, 0)
    if PRCTL is not None:
        # A run whose runner died has lost its status: it ends too.
        PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != RUNNER_PID:
            os._exit(1)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for o in owned:  # the runner's sockets and pipe
        if isinstance(o, int):
            os.close(o)
        else:
            o.close()
    sys.argv[:] = FRESH_ARGV
    sys.path[:] = FRESH_PATH
    sys.meta_path.insert(0, CurrentZipFinder())
    builtins.open = io.open = tracking_open
    if not hasattr(os, 'register_at_fork') and 'random' in sys.modules:
        sys.modules['random'].seed()
    main = types.ModuleType('__main__')
    main.__dict__.update({
        '__file__': '<stdin>', '__cached__': None, '__annotations__': {},
        '__loader__': sys.modules['__main__'].__dict__.get('__loader__'),
        '__builtins__': sys.modules['builtins'],
    })
    sys.modules['__main__'] = main


def begin(fds, env, cwd):
    """Takes the request's standard streams, environment and directory."""
    for i, fd in enumerate(fds):
        os.dup2(fd, i)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)


def run_script(z):
    """Runs the script read from stdin (with the zip it lacks, if z says
    so) in __main__. Returns only by raising SystemExit, which the run
    turns into the exit the interpreter would make for the script
    itself."""
    main = sys.modules['__main__']
    chunks = []
    while True:
        b = os.read(0, 1 << 16)
        if not b:
            break
        chunks.append(b)
    try:
        code = compile_script(b''.join(chunks), z)
    except (SyntaxError, ValueError) as e:
        # As the interpreter reports a script that does not compile:
        # no traceback, the error alone.
        e.__traceback__ = None
        sys.excepthook(type(e), e, None)
        raise SystemExit(1)
    del chunks
    try:
        exec(code, main.__dict__)
    except SystemExit:
        raise
    except BaseException:
        et, ev, tb = sys.exc_info()
        # The traceback from the script's first frame on, as the
        # interpreter prints it for a script.
        if tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
            ev.__traceback__ = tb
        sys.excepthook(et, ev, tb)
        del et, ev, tb
        raise SystemExit(1)
    raise SystemExit(0)


def receive(sock):
    """A message and the descriptors that came with it."""
    msg, anc, _, _ = sock.recvmsg(MAX_MSG, socket.CMSG_SPACE(3 * 4))
    fds = []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(int.from_bytes(data[i:i + 4], sys.byteorder) for i in range(0, len(data) - len(data) % 4, 4))
    return msg, fds


def parse_request(msg, fds):
    """A request's id, environment, directory and zip (None, or the key,
    file and offset of the zip its script lacks); ValueError (and more)
    for a malformed one."""
    req = json.loads(msg.decode('utf-8'))
    if len(fds) != 3:
        raise ValueError('want 3 descriptors, got %d' % len(fds))
    env = dict(kv.split('=', 1) for kv in req['env'])
    z = req.get('zip')
    if z is not None:
        z = (str(z['key']), str(z['path']), int(z['at']))
        if z[2] < 0:
            raise ValueError('zip at %d' % z[2])
    return req['id'], env, req['cwd'], z


# The text of the zips runs' scripts lack, by key, the most recently
# used last; at most ZIP_TEXT_MAX bytes of them. A fork inherits them.
ZIP_TEXT = {}
ZIP_TEXT_MAX = 32 << 20


def load_zip(key, path):
    """The zip text for key, read from path if the runner lacks it."""
    text = ZIP_TEXT.pop(key, None)
    if text is None:
        with io.open(path, 'rb') as f:
            text = f.read().decode('ascii')
        while ZIP_TEXT and sum(len(t) for t in ZIP_TEXT.values()) + len(text) > ZIP_TEXT_MAX:
            del ZIP_TEXT[next(iter(ZIP_TEXT))]
    ZIP_TEXT[key] = text
    return text


def swap_const(code, old, new):
    """code with its (and its functions') constant old replaced by new,
    and how many were."""
    consts, n = [], 0
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            c, k = swap_const(c, old, new)
            n += k
        elif type(c) is str and c == old:
            c, n = new, n + 1
        consts.append(c)
    return code.replace(co_consts=tuple(consts)), n


def compile_script(data, z):
    """The code of the script read from stdin (data), with the zip it
    lacks when z says so: compiled with a short placeholder in the zip's
    string literal, which then becomes the zip's text. That is the whole
    script's code without compiling the zip's hundreds of KiB, bar the
    columns of what follows the literal on its line, which the
    traceback of a script read from stdin never shows (it has no source
    lines to mark). A syntax error is the whole script's own."""
    if z is None:
        return compile(data, '<stdin>', 'exec', dont_inherit=True)
    key, path, at = z
    text = ZIP_TEXT.get(key)
    if text is None:
        text = load_zip(key, path)
    if hasattr(types.CodeType, 'replace'):
        mark = 'spindlezip' + os.urandom(8).hex()
        if mark.encode() not in data:
            try:
                code, n = swap_const(compile(data[:at] + mark.encode() + data[at:], '<stdin>', 'exec', dont_inherit=True), mark, text)
                if n == 1:
                    return code
            except SyntaxError:
                pass  # the whole script's own error, below
    return compile(data[:at] + text.encode('ascii') + data[at:], '<stdin>', 'exec', dont_inherit=True)


def fork(child):
    """Forks a process in a group of its own that calls child (which
    never returns), and returns its pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        child()
    try:
        os.setpgid(pid, pid)  # also done by the child: whichever runs first
    except OSError as e:
        if e.errno not in (errno.EACCES, errno.ESRCH):
            raise
    return pid


def kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


class Spare(object):
    """A fork made while the runner has nothing running, which takes the
    next request from the agent's socket itself: the fork, the setup no
    request changes and a hop through the runner are then paid between
    runs rather than in one (on a 2-CPU machine, the controller's own
    work between two tasks leaves time for them). The runner leaves the
    socket to it until notify says it took a request, or ends."""

    def __init__(self, owned, sock):
        notify, theirs = os.pipe()

        def child():
            os.close(notify)
            run_spare([o for o in owned if o is not sock], sock, theirs)
        try:
            pid = fork(child)
        except OSError:
            os.close(notify)
            raise
        finally:
            os.close(theirs)
        self.pid, self.notify = pid, notify

    def outcome(self):
        """What the spare said on notify, once it said it and closed it:
        None (it ended without taking a request), or the zip it took a
        request for ((key, path), or () for none)."""
        data = b''
        while True:
            b = os.read(self.notify, 4096)
            if not b:
                break
            data += b
        os.close(self.notify)
        lines = data.decode('utf-8', 'replace').split('\n')
        if lines[0] != 'took':
            return None
        return tuple(lines[1:3]) if len(lines) >= 3 else ()


def refuse(sock, fds, rid, why):
    """Answers request rid (None: unknown) with an error, and closes its
    descriptors."""
    for fd in fds:
        os.close(fd)
    send(sock, {'id': rid, 'error': why})


def serve(sock):
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
        os.set_inheritable(fd, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    children = set()  # the runs, until reaped
    reported = set()  # runs whose early status was sent on
    ended = set()  # spares that ended without a run, until reaped
    spare = None  # while there is one, it reads sock, not the runner
    # A spare that ended without a run (the agent gone, a bad request)
    # leaves the next message to the runner: another spare would end
    # the same way on the agent's end of file.
    spares = True
    status_sock = status_socket()
    owned = [sock, wake_r, wake_w]
    if status_sock is not None:
        owned.append(status_sock)
    while True:
        if spare is None and spares and not children:
            try:
                spare = Spare(owned, sock)
            except OSError:
                pass  # the next run forks for itself
            else:
                send(sock, {'spare': spare.pid})  # for the agent to report its memory
        watched = [wake_r, spare.notify if spare is not None else sock]
        if status_sock is not None:
            watched.append(status_sock)
        try:
            ready, _, _ = select.select(watched, [], [])
        except InterruptedError:
            continue
        if spare is not None and spare.notify in ready:
            took = spare.outcome()
            if took is None:
                ended.add(spare.pid)
                spares = False
            else:
                children.add(spare.pid)
                if took:
                    try:
                        load_zip(*took)  # for the next spares
                    except Exception:
                        pass  # they read it themselves
            spare = None
            continue  # sock is the runner's again
        if status_sock in ready:
            for pid, status in early_statuses(status_sock, children, reported):
                send(sock, {'pid': pid, 'status': status, 'early': True})
        if wake_r in ready:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                if pid in ended:
                    ended.discard(pid)
                elif pid in children:
                    children.discard(pid)
                    if pid in reported:
                        reported.discard(pid)
                    else:
                        send(sock, {'pid': pid, 'status': status})
                # a spare's end is told by its notify pipe
        if sock not in ready:
            continue
        msg, fds = receive(sock)
        if not msg:
            # The agent is gone: so are the runs it started.
            for pid in children:
                kill_group(pid)
            return
        spares = True
        try:
            rid, env, cwd, z = parse_request(msg, fds)
        except Exception as e:
            refuse(sock, fds, None, 'bad request: %s' % e)
            continue
        if z is not None:
            try:
                load_zip(z[0], z[1])
            except Exception as e:
                refuse(sock, fds, rid, 'zip %s: %s' % (z[1], e))
                continue
        try:
            pid = fork(lambda: run_child(owned, fds, env, cwd, z))
        except OSError as e:
            refuse(sock, fds, rid, 'fork: %s' % e)
            continue
        for fd in fds:
            os.close(fd)
        children.add(pid)
        send(sock, {'id': rid, 'pid': pid, 'ahead': False})


def main():
    if not hasattr(os, 'fork') or not hasattr(socket.socket, 'recvmsg'):
        raise SystemExit('unsupported: no os.fork or socket.recvmsg')
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0, CTL_FD)
    sock.set_inheritable(False)
    try:
        loaded, cache = preload(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
    except Exception as e:
        send(sock, {'error': 'preload %s: %s: %s' % (sys.argv[1], type(e).__name__, e)})
        return
    send(sock, {'ready': True, 'pid': os.getpid(), 'version': '%d.%d.%d' % sys.version_info[:3], 'preloaded': loaded,
                'cached_code': cache.hits})
    serve(sock)


if __name__ == '__main__':  # as the agent runs it (-c); not when a test imports it
    main()
