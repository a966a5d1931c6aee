"""Keeping a process's memory and environment from other processes of the same user (Linux).

`make_undumpable()` is prctl(PR_SET_DUMPABLE, 0): afterwards /proc/<pid>/environ, /proc/<pid>/mem and
ptrace of this process are refused to every process without CAP_SYS_PTRACE, the same uid included, and
no core dump is written. The Tool Pod's launcher calls it before any tenant code runs, so a tenant tool
body in a worker process (servers/tenant_workers.py) cannot read the connector and LLM keys the Tool Pod
holds; each worker calls it before it is handed its own secrets.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_PR_SET_DUMPABLE = 4
_PR_GET_DUMPABLE = 3


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def make_undumpable() -> bool:
    """True when this process is now non-dumpable; False where prctl does not exist (not Linux)."""
    libc = _libc()
    if libc is None:
        return False
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    return True


def is_dumpable() -> bool:
    """What prctl(PR_GET_DUMPABLE) says (True off Linux, where nothing protects the process)."""
    libc = _libc()
    return True if libc is None else bool(libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0))


_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
# SECBIT_NOROOT, its lock, SECBIT_NO_SETUID_FIXUP and its lock: uid 0 no longer means capabilities.
_SECUREBITS = 0x0F
_CAP_VERSION_3 = 0x20080522
_LAST_CAP = 63


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def drop_capabilities() -> bool:
    """Give up every capability for good (bounding set, ambient, effective, permitted; no exec regains
    them, no_new_privs set). A root process keeps uid 0 but loses CAP_SYS_PTRACE and CAP_DAC_*: it cannot
    read a non-dumpable process's /proc/<pid>/environ or memory, or ptrace it. True when done (Linux)."""
    libc = _libc()
    if libc is None:
        return False
    # Without CAP_SETPCAP (a non-root process has none) these fail with EPERM: nothing to drop then.
    libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0)
    for cap in range(_LAST_CAP + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset() to no capabilities failed")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    return True


def effective_capabilities() -> int:
    """CapEff from /proc/self/status (0 when none; -1 where unknown)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return -1
