"""A child's memory on macOS as Activity Monitor counts it: `phys_footprint`, read with
`proc_pid_rusage`, which a process may call for its own user's processes.

psutil's USS goes through `task_for_pid()`, which macOS refuses an unsigned, non-root
Python even for its own children, so it never measures anything there. The struct below
is `rusage_info_v2` as Apple's public `<sys/resource.h>` lays it out (macOS 10.10+).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

RUSAGE_INFO_V2 = 2
LIBSYSTEM = "/usr/lib/libSystem.B.dylib"  # re-exports libproc; dlopen finds it in the dyld cache


class RusageInfoV2(ctypes.Structure):
    """`struct rusage_info_v2` from `<sys/resource.h>`."""

    _fields_ = [
        ("ri_uuid", ctypes.c_uint8 * 16),
        ("ri_user_time", ctypes.c_uint64),
        ("ri_system_time", ctypes.c_uint64),
        ("ri_pkg_idle_wkups", ctypes.c_uint64),
        ("ri_interrupt_wkups", ctypes.c_uint64),
        ("ri_pageins", ctypes.c_uint64),
        ("ri_wired_size", ctypes.c_uint64),
        ("ri_resident_size", ctypes.c_uint64),
        ("ri_phys_footprint", ctypes.c_uint64),
        ("ri_proc_start_abstime", ctypes.c_uint64),
        ("ri_proc_exit_abstime", ctypes.c_uint64),
        ("ri_child_user_time", ctypes.c_uint64),
        ("ri_child_system_time", ctypes.c_uint64),
        ("ri_child_pkg_idle_wkups", ctypes.c_uint64),
        ("ri_child_interrupt_wkups", ctypes.c_uint64),
        ("ri_child_pageins", ctypes.c_uint64),
        ("ri_child_elapsed_abstime", ctypes.c_uint64),
        ("ri_diskio_bytesread", ctypes.c_uint64),
        ("ri_diskio_byteswritten", ctypes.c_uint64),
    ]


# int proc_pid_rusage(int pid, int flavor, rusage_info_t *buffer), from <libproc.h>
PROC_PID_RUSAGE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, use_errno=True
)
RusageFn = Callable[[int, int, object], int]


def libproc() -> RusageFn:
    """The system's `proc_pid_rusage` (macOS only: raises OSError elsewhere)."""
    fn: RusageFn = PROC_PID_RUSAGE(("proc_pid_rusage", ctypes.CDLL(LIBSYSTEM, use_errno=True)))
    return fn


class PhysFootprint:
    """Reads processes' `phys_footprint` through the `proc_pid_rusage` that `load`
    returns (called once, on the first reading; a test hands in a stand-in)."""

    def __init__(self, load: Callable[[], RusageFn] = libproc) -> None:
        self._load = load
        self._fn: RusageFn | None = None
        self._unavailable = False

    def read(self, pid: int) -> int | None:
        """Bytes of `pid`'s physical footprint; None when it is gone, refused, or the
        call is not there (not a Mac)."""
        fn = self._function()
        if fn is None:
            return None
        info = RusageInfoV2()
        if fn(pid, RUSAGE_INFO_V2, ctypes.byref(info)) != 0:
            return None  # ESRCH (gone) or EPERM (another user's): no measurement
        return int(info.ri_phys_footprint)

    def _function(self) -> RusageFn | None:
        if self._fn is None and not self._unavailable:
            try:
                self._fn = self._load()
            except (OSError, AttributeError):
                self._unavailable = True
        return self._fn
