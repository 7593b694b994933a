"""Unit tests of runner.py's parts that need no agent (python3 -m unittest)."""
import importlib.util
import os
import socket
import unittest

_spec = importlib.util.spec_from_file_location("runner", os.path.join(os.path.dirname(__file__), "runner.py"))
runner = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(runner)


class EarlyStatusTest(unittest.TestCase):
    def setUp(self):
        self.sock = runner.status_socket()
        if self.sock is None:
            self.skipTest("no SO_PASSCRED or abstract sockets here")
        self.addCleanup(self.sock.close)

    def send(self, text):
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(text, runner.STATUS_ADDR)

    def test_only_a_child_reports_and_only_once(self):
        me = os.getpid()
        reported = set()
        self.send(b"256")
        self.assertEqual(runner.early_statuses(self.sock, set(), reported), [],
                         "a status from a process that is not a run was taken")
        self.send(b"256")
        self.send(b"0")
        self.assertEqual(runner.early_statuses(self.sock, {me}, reported), [(me, 256)])
        self.assertEqual(reported, {me})

    def test_garbage_ignored(self):
        self.send(b"not a status")
        self.assertEqual(runner.early_statuses(self.sock, {os.getpid()}, set()), [])

    def test_report_status_closes_streams_and_sends(self):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.dup2(w, 1)
                os.close(r)
                os.close(w)
                runner.report_status(3)
            finally:
                os._exit(0)
        os.close(w)
        try:
            self.assertEqual(os.read(r, 1), b"", "stdout not closed")  # EOF: the child closed it
        finally:
            os.close(r)
        os.waitpid(pid, 0)
        self.assertEqual(runner.early_statuses(self.sock, {pid}, set()), [(pid, 3 << 8)])


class CodeCacheTest(unittest.TestCase):
    def test_cached_code_gets_its_filename(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "f.marshal")
            first = runner.CodeCache(path)
            code = first.compile(b"def f():\n    return 42\n", "/one/a.py")
            self.assertEqual((first.hits, first.misses), (0, 1))
            first.save()
            second = runner.CodeCache(path)
            again = second.compile(b"def f():\n    return 42\n", "/two/a.py")
            self.assertEqual((second.hits, second.misses), (1, 0))
            self.assertEqual(again.co_filename, "/two/a.py")
            self.assertEqual(again.co_consts[0].co_filename, "/two/a.py")
            ns = {}
            exec(again, ns)
            self.assertEqual(ns["f"](), 42)
            self.assertIsNotNone(code)

    def test_bad_file_ignored(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "f.marshal")
            with open(path, "wb") as f:
                f.write(runner.CodeCache(None).header + b"garbage")
            cache = runner.CodeCache(path)
            cache.compile(b"x = 1\n", "/x.py")
            self.assertEqual((cache.hits, cache.misses), (0, 1))


if __name__ == "__main__":
    unittest.main()
