"""Run a model-written Python snippet in a fresh, locked-down interpreter.

One call = one child interpreter (``python -I -S -B``), so nothing leaks between calls and the
harness survives whatever the snippet does. Layers, outermost first:

* parent: wall-clock timeout, the child runs in its own session and the whole process group is
  SIGKILLed on timeout; stdout/stderr are drained concurrently and truncated; the result comes
  back through a file in a private temp dir, never mixed with the snippet's stdout.
* rlimits: RLIMIT_AS (memory), RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_CORE=0, RLIMIT_NPROC,
  RLIMIT_NOFILE.
* kernel (Linux, best effort; which ones applied is reported in ``SandboxResult.isolation``):
  Landlock confines the filesystem to read-only stdlib/system libraries plus the read-write
  scratch dir and denies TCP; a seccomp filter (x86_64) makes fork/exec/ptrace/mount/kill of
  other processes/raising rlimits fail with EPERM. These matter because CI runs as root, where
  RLIMIT_NPROC and file permissions do not bind.
* audit hook inside the child: turns forbidden operations (process creation, ctypes, network,
  files outside the scratch dir) into a clear ``PermissionError`` naming the operation or path.
  It gives the model readable errors; the kernel layers are what hold if it is bypassed.

The snippet must assign ``result``; its value (``str`` as-is, anything else as ``repr``) is
what the caller gets. Only the standard library is importable.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import marshal
import math
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

OUTPUT_LIMIT_BYTES = 10_000
NO_RESULT_MESSAGE = (
    "the code did not assign `result` (execute_python returns the value of the variable "
    "`result`; print() output is not returned)."
)
_REPORT_FIELDS = ("status", "kind", "text", "repr", "message", "isolation")
_REPORT_MAX_BYTES = 1 << 20
_STDOUT_ECHO_CHARS = 2_000
_READER_GRACE_S = 1.0


@dataclass(frozen=True)
class SandboxResult:
    ok: bool
    result_text: str | None  # what a tool shows: a str result as-is, anything else its repr
    result_repr: str | None
    stdout: str
    stderr: str
    error: str | None
    error_kind: str | None  # syntax | exception | memory | no_result | repr | timeout | crash
    timed_out: bool
    duration_ms: float
    returncode: int | None
    pid: int | None
    isolation: tuple[str, ...]  # protection layers the child reported as active


@dataclass(frozen=True)
class _ChildRun:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_ms: float
    pid: int


async def run_python(
    code: str,
    *,
    scratch_dir: Path,
    timeout_s: float = 5.0,
    memory_mb: int = 256,
    max_processes: int = 64,
    file_size_mb: int = 16,
    output_limit: int = OUTPUT_LIMIT_BYTES,
    python_guards: bool = True,
) -> SandboxResult:
    """Run ``code`` in a sandboxed child interpreter with ``scratch_dir`` as its cwd.

    ``max_processes`` is RLIMIT_NPROC (the kernel only enforces it for non-root users; forking
    is blocked outright by the other layers). ``python_guards=False`` drops the audit hook so
    tests can check that the kernel layers hold on their own; never use it for model code.
    """
    scratch = Path(scratch_dir).resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="benchrig-sandbox-") as private:
        code_path = Path(private) / "code.py"
        result_path = Path(private) / "result.bin"
        boot_path = Path(private) / "boot.bin"
        code_path.write_bytes(code.encode("utf-8", "replace"))
        boot_path.write_bytes(_child_bytecode())
        argv = [
            sys.executable, "-I", "-S", "-B", "-u", "-X", "utf8", "-c", _CHILD_LOADER,
            str(boot_path), str(code_path), str(result_path), str(scratch),
            str(memory_mb * 1024 * 1024), str(_cpu_limit_s(timeout_s)),
            str(file_size_mb * 1024 * 1024), str(max_processes), str(output_limit),
            "1" if python_guards else "0",
        ]  # fmt: skip
        run = await _run_child(argv, scratch, timeout_s, output_limit)
        report = _read_report(result_path)
    return _assemble(run, report, timeout_s=timeout_s, memory_mb=memory_mb)


@functools.cache
def _child_bytecode() -> bytes:
    # Compiling the bootstrap costs ~10 ms; do it once per harness process, not per call.
    # The child is the same interpreter (sys.executable), so the marshal format matches.
    return marshal.dumps(compile(_CHILD_SOURCE, "<string>", "exec"))


def _cpu_limit_s(timeout_s: float) -> int:
    # A backstop for the wall clock: a CPU-bound child dies even if the parent stalls.
    return math.ceil(timeout_s) + 1


def _child_env(scratch: Path) -> dict[str, str]:
    # Nothing from the harness's environment (API keys...) reaches the child. One malloc
    # arena per thread would reserve 64 MB of address space each and trip RLIMIT_AS early.
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(scratch),
        "TMPDIR": str(scratch),
        "MALLOC_ARENA_MAX": "2",
    }


async def _run_child(argv: list[str], scratch: Path, timeout_s: float, limit: int) -> _ChildRun:
    start = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=scratch,
        env=_child_env(scratch),
        start_new_session=True,  # own process group, so one killpg takes everything down
    )
    assert proc.stdout is not None and proc.stderr is not None
    readers = [
        asyncio.create_task(_read_capped(proc.stdout, limit)),
        asyncio.create_task(_read_capped(proc.stderr, limit)),
    ]
    timed_out = False
    try:
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            timed_out = True
            _kill_group(proc)
            await proc.wait()
        duration_ms = (time.monotonic() - start) * 1000
        stdout, stderr = await _finish_readers(readers, proc)
    except BaseException:
        # Cancelled mid-run (episode aborted): never leave the child running, and let asyncio
        # reap it and close the pipes before the caller's loop goes away.
        _kill_group(proc)
        await _reap_after_kill(proc, readers)
        raise
    return _ChildRun(proc.returncode, stdout, stderr, timed_out, duration_ms, proc.pid)


async def _reap_after_kill(
    proc: asyncio.subprocess.Process, readers: list[asyncio.Task[str]]
) -> None:
    waiter = asyncio.ensure_future(proc.wait())
    # Cancelled again: give up on tidiness, the child is already dead.
    with contextlib.suppress(BaseException):
        await asyncio.wait([waiter, *readers], timeout=2 * _READER_GRACE_S)
    for task in (waiter, *readers):
        task.cancel()


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    # Only while the child is unreaped: its pid (= the group id) cannot be reused until then,
    # so we can never signal an unrelated process group.
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _finish_readers(
    readers: list[asyncio.Task[str]], proc: asyncio.subprocess.Process
) -> tuple[str, str]:
    _, pending = await asyncio.wait(readers, timeout=_READER_GRACE_S)
    if pending:
        # Something still holds the pipes (a process that escaped the fork block): it is a
        # live member of the child's group, so the group id is still reserved and safe to kill.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        await asyncio.wait(pending, timeout=_READER_GRACE_S)
    stdout, stderr = (_reader_text(task) for task in readers)
    return stdout, stderr


def _reader_text(task: asyncio.Task[str]) -> str:
    if not task.done():
        task.cancel()
        return ""
    return "" if task.cancelled() or task.exception() else task.result()


async def _read_capped(stream: asyncio.StreamReader, limit: int) -> str:
    """Drain ``stream`` to EOF (so the child never blocks on a full pipe), keep ``limit`` bytes."""
    kept = bytearray()
    dropped = 0
    while chunk := await stream.read(65536):
        room = limit - len(kept)
        kept += chunk[:room] if room > 0 else b""
        dropped += max(0, len(chunk) - max(room, 0))
    text = kept.decode("utf-8", "replace")
    if dropped:
        text += f"\n[... output truncated: {dropped} more bytes ...]"
    return text


def _read_report(path: Path) -> dict[str, str] | None:
    """Parse the child's length-prefixed report; None if absent or malformed (never raises)."""
    try:
        with path.open("rb") as f:
            data = f.read(_REPORT_MAX_BYTES)
    except OSError:
        return None
    fields: list[str] = []
    pos = 0
    for _ in _REPORT_FIELDS:
        newline = data.find(b"\n", pos, pos + 12)
        digits = data[pos:newline] if newline >= 0 else b""
        if not digits.isdigit():
            return None
        end = newline + 1 + int(digits)
        if end > len(data):
            return None
        fields.append(data[newline + 1 : end].decode("utf-8", "replace"))
        pos = end
    return dict(zip(_REPORT_FIELDS, fields, strict=True))


def _assemble(
    run: _ChildRun, report: dict[str, str] | None, *, timeout_s: float, memory_mb: int
) -> SandboxResult:
    isolation = tuple(filter(None, (report or {}).get("isolation", "").split(",")))
    ok = False
    text = rep = None
    if run.timed_out:
        kind = "timeout"
        error = (
            f"timed out after {float(timeout_s)} s (the sandbox killed the code; "
            "is there an infinite loop?)"
        )
    elif report is not None and report["status"] == "ok":
        ok, kind, error = True, None, None
        text, rep = report["text"], report["repr"]
    elif report is not None:
        kind = report["kind"]
        error = _error_message(kind, report["message"], run.stdout)
    else:
        kind = "crash"
        error = _crash_message(run, memory_mb, _cpu_limit_s(timeout_s))
    return SandboxResult(
        ok=ok,
        result_text=text,
        result_repr=rep,
        stdout=run.stdout,
        stderr=run.stderr,
        error=error,
        error_kind=kind,
        timed_out=run.timed_out,
        duration_ms=run.duration_ms,
        returncode=run.returncode,
        pid=run.pid,
        isolation=isolation,
    )


def _stdout_echo(stdout: str) -> str:
    echo = stdout.rstrip("\n")
    if len(echo) > _STDOUT_ECHO_CHARS:
        echo = echo[:_STDOUT_ECHO_CHARS] + " [...]"
    return echo


def _error_message(kind: str, message: str, stdout: str) -> str:
    echo = _stdout_echo(stdout)
    if kind == "no_result":
        return (
            f"{NO_RESULT_MESSAGE} stdout was: {echo}"
            if echo
            else (f"{NO_RESULT_MESSAGE} stdout was empty.")
        )
    if echo:
        message += f"\nstdout before the error: {echo}"
    return message


def _crash_message(run: _ChildRun, memory_mb: int, cpu_s: int) -> str:
    code = run.returncode
    if code is not None and code < 0:
        sig = -code
        name = signal.Signals(sig).name if sig in signal.valid_signals() else f"signal {sig}"
        if sig == signal.SIGXCPU:
            return f"the code used more than its CPU time limit ({cpu_s} s) and was killed"
        return (
            f"the sandbox process was killed by {name} (usually the memory limit of {memory_mb} MB)"
        )
    tail = run.stderr.strip()[-1000:]
    message = (
        f"the sandbox process exited with status {code} without reporting a result "
        "(did the code call os._exit() or close file descriptors?)"
    )
    return f"{message}\nstderr: {tail}" if tail else message


# The child runs ``python -I -S -B -u -X utf8 -c _CHILD_LOADER BOOT ARGS``: the loader execs the
# marshalled bootstrap below. It is a string, not a module, so the child imports nothing from
# the harness and starts in about the time of a bare interpreter.
# Order matters: read inputs and open the report file, set rlimits, then the kernel layers
# (Landlock, seccomp: they forbid raising the rlimits again), then the audit hook, then the code.
_CHILD_LOADER = (
    "import marshal, sys\n"
    "with open(sys.argv.pop(1), 'rb') as f:\n"
    "    exec(marshal.loads(f.read()))\n"
)
_CHILD_SOURCE = r'''
import os
import sys

_pwrite, _ftruncate, _exit, _repr, _isinstance = os.pwrite, os.ftruncate, os._exit, repr, isinstance
BOOT = "<string>"

# Landlock filesystem rights (linux/landlock.h).
LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1, 2, 4, 8
LL_MAKE_CHAR, LL_MAKE_BLOCK, LL_TRUNCATE, LL_IOCTL_DEV = 1 << 6, 1 << 11, 1 << 14, 1 << 15
LL_FILE_RIGHTS = LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE | LL_IOCTL_DEV
LIB_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")
READ_FILES = ("/dev/urandom", "/dev/random", "/dev/zero", "/dev/null", "/etc/ld.so.cache",
              "/etc/localtime")
READ_DIRS = ("/usr/share/zoneinfo",)

# x86_64 syscalls that fail with EPERM under the seccomp filter.
DENY_SYSCALLS = (
    57, 58, 59, 322,  # fork vfork execve execveat
    101, 310, 311, 438,  # ptrace process_vm_readv/writev pidfd_getfd
    200, 129, 297, 424,  # tkill rt_sigqueueinfo rt_tgsigqueueinfo pidfd_send_signal
    160,  # setrlimit
    165, 166, 155, 161, 169, 167, 168,  # mount umount2 pivot_root chroot reboot swapon swapoff
    175, 176, 313, 246, 320,  # (f)init/delete_module kexec_load kexec_file_load
    272, 308, 321, 298, 323,  # unshare setns bpf perf_event_open userfaultfd
    172, 173, 304, 133, 259,  # iopl ioperm open_by_handle_at mknod mknodat
    425, 428, 429, 430, 432, 433, 442,  # io_uring_setup, new mount API
    163, 164, 227, 170, 171, 179, 103,  # acct settimeofday clock_settime sethostname ... syslog
    248, 249, 250,  # add_key request_key keyctl
)
SYS_CLONE, SYS_CLONE3, SYS_KILL, SYS_TGKILL, SYS_PRLIMIT64 = 56, 435, 62, 234, 302
CLONE_THREAD = 0x10000

BLOCKED_EVENTS = {
    "os.fork": "starting processes", "os.forkpty": "starting processes",
    "os.system": "running shell commands", "os.exec": "starting programs",
    "os.posix_spawn": "starting processes", "os.spawn": "starting processes",
    "os.startfile": "starting programs", "subprocess.Popen": "starting processes",
    "os.killpg": "signalling process groups",
    "resource.setrlimit": "changing resource limits",
    "resource.prlimit": "changing resource limits",
    "socket.connect": "network access", "socket.bind": "network access",
    "socket.sendto": "network access", "socket.sendmsg": "network access",
    "socket.getaddrinfo": "network access", "socket.gethostbyname": "network access",
    "socket.gethostbyaddr": "network access", "socket.gethostbyname_ex": "network access",
}
BLOCKED_IMPORTS = {"_posixsubprocess", "_ctypes", "_ctypes_test", "_xxsubinterpreters",
                   "_xxinterpchannels", "_testcapi", "_testinternalcapi"}
READ_PATH_EVENTS = {"os.listdir": "listing", "os.scandir": "listing",
                    "os.listxattr": "reading", "os.getxattr": "reading"}
WRITE_PATH_EVENTS = {
    "os.chmod": (0,), "os.chown": (0,), "os.chflags": (0,), "os.lchflags": (0,),
    "os.mkdir": (0,), "os.remove": (0,), "os.rmdir": (0,), "os.truncate": (0,),
    "os.utime": (0,), "os.setxattr": (0,), "os.removexattr": (0,),
    "os.rename": (0, 1), "os.link": (0, 1), "os.symlink": (1,),
}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def main():
    args = sys.argv[1:]
    code_path, result_path, scratch = args[0], args[1], args[2]
    mem, cpu, fsize, nproc, limit = (int(a) for a in args[3:8])
    guards = args[8] == "1"
    fd = os.open(result_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with open(code_path, "rb") as f:
        source = f.read().decode("utf-8", "replace")
    read_roots = stdlib_roots()
    layers = ["rlimits"] if set_limits(mem, cpu, fsize, nproc) else []
    libc = load_libc()
    if libc is not None and landlock(libc, scratch, read_roots):
        layers.append("landlock")
    if libc is not None and seccomp(libc):
        layers.append("seccomp")
    if guards:
        install_guards(scratch, read_roots)
        layers.append("audit-hook")
    fields = run_user_code(source, limit, mem >> 20)
    fields.append(",".join(layers))
    report(fd, fields)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    # Skip interpreter shutdown: the user's threads and atexit handlers must not delay us.
    _exit(0)


def stdlib_roots():
    # What the interpreter itself reads after start-up: the stdlib and lib-dynload.
    roots = []
    for entry in sys.path:
        path = os.path.realpath(entry)
        if entry and os.path.exists(path) and path != "/" and path not in roots:
            roots.append(path)
    return roots


def set_limits(mem, cpu, fsize, nproc):
    try:
        import resource
    except ImportError:
        return False
    wanted = ((resource.RLIMIT_AS, mem, mem), (resource.RLIMIT_CPU, cpu, cpu + 1),
              (resource.RLIMIT_FSIZE, fsize, fsize), (resource.RLIMIT_CORE, 0, 0),
              (resource.RLIMIT_NPROC, nproc, nproc), (resource.RLIMIT_NOFILE, 256, 256))
    for which, soft, hard in wanted:
        old_soft, old_hard = resource.getrlimit(which)
        if old_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, old_hard), min(hard, old_hard)
        resource.setrlimit(which, (soft, hard))
    return True


def load_libc():
    if sys.platform != "linux":
        return None
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True)
    except (ImportError, OSError):
        return None


def syscall(libc, *args):
    import ctypes
    fn = libc.syscall
    fn.restype = ctypes.c_long
    return fn(*(a if _isinstance(a, ctypes.Array) else ctypes.c_long(a) for a in args))


def landlock(libc, scratch, read_roots):
    """Confine the filesystem: read-only stdlib and libraries, read-write scratch, no TCP."""
    import ctypes
    import struct
    abi = syscall(libc, 444, 0, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
    if abi < 1:
        return False
    handled = (1 << 13) - 1
    handled |= (1 << 13 if abi >= 2 else 0) | (LL_TRUNCATE if abi >= 3 else 0)
    handled |= LL_IOCTL_DEV if abi >= 5 else 0
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    net, scoped = (3 if abi >= 4 else 0), (3 if abi >= 6 else 0)  # TCP bind+connect; signals
    attr = ctypes.create_string_buffer(struct.pack("=QQQ", handled, net, scoped)[:size], size)
    ruleset = syscall(libc, 444, attr, size, 0)
    if ruleset < 0:
        return False
    try:
        read_x = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR
        scratch_rights = handled & ~(LL_EXECUTE | LL_MAKE_CHAR | LL_MAKE_BLOCK | LL_IOCTL_DEV)
        rules = [(scratch, scratch_rights), ("/dev/null", LL_WRITE_FILE | LL_TRUNCATE)]
        rules += [(path, read_x) for path in (*read_roots, *LIB_DIRS)]
        rules += [(path, LL_READ_FILE | LL_READ_DIR) for path in (*READ_FILES, *READ_DIRS)]
        for path, rights in rules:
            add_landlock_rule(libc, ruleset, path, rights & handled)
        if libc.prctl(ctypes.c_long(38), ctypes.c_long(1), ctypes.c_long(0), ctypes.c_long(0),
                      ctypes.c_long(0)) != 0:  # PR_SET_NO_NEW_PRIVS
            return False
        return syscall(libc, 446, ruleset, 0) == 0  # landlock_restrict_self
    finally:
        os.close(ruleset)


def add_landlock_rule(libc, ruleset, path, rights):
    import ctypes
    import struct
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            rights &= LL_FILE_RIGHTS
        rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)
        syscall(libc, 445, ruleset, 1, rule, 0)  # LANDLOCK_RULE_PATH_BENEATH
    finally:
        os.close(fd)


def bpf_program(pid):
    import struct
    def op(code, k, jt=0, jf=0):
        return struct.pack("=HBBI", code, jt, jf, k)
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, eperm, enosys = 0x7FFF0000, 0x00050001, 0x00050026
    prog = [op(ld, 4), op(jeq, 0xC000003E, 1, 0), op(ret, eperm),  # other ABIs (i386): deny
            op(ld, 0), op(jge, 0x40000000, 0, 1), op(ret, eperm)]  # x32 syscalls: deny
    for nr in DENY_SYSCALLS:
        prog += [op(jeq, nr, 0, 1), op(ret, eperm)]
    prog += [op(jeq, SYS_CLONE3, 0, 1), op(ret, enosys)]  # glibc then falls back to clone
    # clone is allowed for threads only; kill/tgkill only towards ourselves.
    prog += [op(jeq, SYS_CLONE, 0, 4), op(ld, 16), op(jset, CLONE_THREAD, 0, 1),
             op(ret, allow), op(ret, eperm)]
    for nr in (SYS_KILL, SYS_TGKILL):
        prog += [op(jeq, nr, 0, 4), op(ld, 16), op(jeq, pid, 0, 1), op(ret, allow),
                 op(ret, eperm)]
    # prlimit64 may read limits (new_limit == NULL) but not set them.
    prog += [op(jeq, SYS_PRLIMIT64, 0, 6), op(ld, 32), op(jeq, 0, 0, 3), op(ld, 36),
             op(jeq, 0, 0, 1), op(ret, allow), op(ret, eperm)]
    prog.append(op(ret, allow))
    return b"".join(prog)


def seccomp(libc):
    import ctypes
    import struct
    if os.uname().machine != "x86_64":
        return False
    prog = bpf_program(os.getpid())
    filt = ctypes.create_string_buffer(prog, len(prog))
    fprog = ctypes.create_string_buffer(
        struct.pack("=HxxxxxxQ", len(prog) // 8, ctypes.addressof(filt)), 16)
    c = ctypes.c_long
    if libc.prctl(c(38), c(1), c(0), c(0), c(0)) != 0:  # PR_SET_NO_NEW_PRIVS
        return False
    return libc.prctl(c(22), c(2), fprog, c(0), c(0)) == 0  # PR_SET_SECCOMP, MODE_FILTER


def install_guards(scratch, read_roots):
    """Audit hook: forbidden operations raise PermissionError naming the operation or path."""
    import _posixsubprocess

    def no_fork_exec(*args, **kwargs):
        raise PermissionError("sandbox: starting processes is not allowed")

    # multiprocessing's spawn calls this C function directly, with no audit event of its own.
    _posixsubprocess.fork_exec = no_fork_exec
    realpath, fspath, fsdecode, sep, pid = (
        os.path.realpath, os.fspath, os.fsdecode, os.sep, os.getpid())
    read_files = set(READ_FILES) | {"/dev/null"}
    read_dirs = (*read_roots, *READ_DIRS)
    hint = f"only files inside the scratch dir {scratch!r} (the starting cwd) can be used"

    def inside(path, roots):
        return any(path == r or path.startswith(r.rstrip(sep) + sep) for r in roots)

    def check(target, write, verb):
        if target is None or _isinstance(target, int):
            return
        path = realpath(fsdecode(fspath(target)))
        if inside(path, (scratch,)):
            return
        if write and path == "/dev/null":
            return
        if not write and (path in read_files or inside(path, read_dirs)):
            return
        raise PermissionError(f"sandbox: {verb} {path!r} is not allowed; {hint}")

    def hook(event, args):
        if event == "open":
            mode, flags = args[1], args[2]
            write = (any(c in mode for c in "wax+") if _isinstance(mode, str)
                     else bool((flags or 0) & WRITE_FLAGS))
            check(args[0], write, "writing" if write else "reading")
        elif event in READ_PATH_EVENTS:
            check("." if args[0] is None else args[0], False, READ_PATH_EVENTS[event])
        elif event in WRITE_PATH_EVENTS:
            for i in WRITE_PATH_EVENTS[event]:
                check(args[i], True, "changing")
        elif event == "sqlite3.connect":
            db = args[0]
            if _isinstance(db, (str, bytes)) and db not in (":memory:", "", b":memory:", b""):
                check(db, True, "opening database")
        elif event in BLOCKED_EVENTS:
            raise PermissionError(f"sandbox: {event} is blocked ({BLOCKED_EVENTS[event]} "
                                  "is not allowed in the sandbox)")
        elif event.startswith("ctypes."):
            raise PermissionError(f"sandbox: {event} is blocked (ctypes is not allowed)")
        elif event == "os.kill" and args[0] != pid:
            raise PermissionError("sandbox: os.kill is blocked (signalling other processes "
                                  "is not allowed)")
        elif event == "import" and args[0] in BLOCKED_IMPORTS:
            raise PermissionError(f"sandbox: importing {args[0]} is not allowed")

    sys.addaudithook(hook)


def run_user_code(source, limit, mem_mb):
    # A fresh __main__ so `if __name__ == "__main__":` and pickling of user classes work.
    module = type(sys)("__main__")
    module.__builtins__ = __builtins__
    sys.modules["__main__"] = module
    ns = module.__dict__
    try:
        code = compile(source, "<code>", "exec")
    except (SyntaxError, ValueError) as exc:
        return ["error", "syntax", "", "", describe(exc, source, ns, "the code does not compile")]
    except BaseException as exc:  # MemoryError/RecursionError on absurdly nested code
        return ["error", "syntax", "", "", describe(exc, source, ns, "the code does not compile")]
    # Address space handed back on MemoryError so the error can still be formatted; bytes()
    # is calloc'd, so unlike bytearray() it costs no page faults.
    ballast = bytes(8 << 20)
    try:
        exec(code, ns)
    except BaseException as exc:
        del ballast
        if _isinstance(exc, MemoryError):
            ns.clear()  # drop what the code built so the report itself has room
            head = f"the code ran out of memory (limit {mem_mb} MB)"
            return ["error", "memory", "", "", describe(exc, source, ns, head)]
        return ["error", "exception", "", "", describe(exc, source, ns, "the code raised")]
    del ballast
    if "result" not in ns:
        return ["error", "no_result", "", "", ""]
    return result_fields(ns["result"], limit)


def describe(exc, source, ns, head):
    for attempt in range(2):
        try:
            return f"{head}:\n{format_exception(exc, source)}"
        except BaseException:
            ns.clear()
    try:
        return f"{head}: {type(exc).__name__}"
    except BaseException:
        return head


def format_exception(exc, source):
    import linecache
    import traceback
    linecache.cache["<code>"] = (len(source), None, source.splitlines(True), "<code>")
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != BOOT]
    lines = ["Traceback (most recent call last):\n"] if frames else []
    if len(frames) > 8:
        lines.append(f"  [... {len(frames) - 8} earlier frames ...]\n")
    lines += traceback.format_list(frames[-8:])
    lines += traceback.format_exception_only(type(exc), exc)
    text = "".join(lines).rstrip("\n")
    return text if len(text) <= 3000 else "[...]" + text[-3000:]


def cap(text, limit):
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... result truncated: {len(text) - limit} more characters ...]"


def result_fields(value, limit):
    try:
        if _isinstance(value, str):
            text = str.__str__(value)
            shown = cap(text, limit)
            rep = _repr(text[:limit])
        else:
            rep = shown = cap(_repr(value), limit)
    except BaseException as exc:
        try:
            why = f"{type(exc).__name__}: {exc}"
        except BaseException:
            why = "an exception"
        return ["error", "repr", "", "", f"repr(result) failed: {why}"]
    return ["ok", "", shown, rep, ""]


def report(fd, fields):
    data = b"".join(b"%d\n%s" % (len(b), b)
                    for b in (f.encode("utf-8", "backslashreplace") for f in fields))
    # From offset 0 after truncating: whatever the code wrote to this fd is discarded.
    _ftruncate(fd, 0)
    view, offset = memoryview(data), 0
    while offset < len(data):
        offset += _pwrite(fd, view[offset:], offset)


main()
'''
