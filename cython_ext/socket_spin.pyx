# cython: language_level=3
"""Polling one socket for a short window before a reader sleeps (compiled twin).

The pure twin is ``jmspy/_pure/socket_spin.py``; ``tests/test_socket_spin_twins.py`` holds
both to the same behaviour. This one runs the whole window without the GIL: a reader
that polls (``jmspy/idle_spin.py``) leaves the GIL to the program's other threads, where
the pure loop takes it back after every look. A yield that kept the poller off the CPU
longer than ``jmspy.idle_spin.GAVE_WAY_S`` gave the CPU to another thread: the window
ends there, contended (jmspy/idle_spin.py says why).
"""

from libc.errno cimport EINTR, errno
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from jmspy.idle_spin import CONTENDED, GAVE_WAY_S, QUIET, READABLE

cdef double _gave_way = GAVE_WAY_S
cdef int _quiet = QUIET, _readable = READABLE, _contended = CONTENDED


cdef extern from "<poll.h>" nogil:
    struct pollfd:
        int fd
        short events
        short revents
    int poll(pollfd *fds, unsigned long nfds, int timeout)
    const short POLLIN


cdef extern from "<sched.h>" nogil:
    int sched_yield()


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


def poll_for(int fd, double window) -> int:
    """Poll ``fd`` until it is readable or ``window`` seconds have passed, yielding the CPU
    between looks. READABLE if it became readable (or closed or broke: reading then
    tells), QUIET if the window ran out first, CONTENDED if a yield gave the CPU to
    another thread first (``jmspy.idle_spin``'s constants). It looks at least once."""
    cdef pollfd p
    cdef int got = 0
    cdef int ended
    cdef double deadline, began
    p.fd = fd
    p.events = POLLIN
    p.revents = 0
    with nogil:
        deadline = _now() + window
        while True:
            got = poll(&p, 1, 0)
            if got > 0 or (got < 0 and errno != EINTR):
                ended = _readable  # readable, or an error that reading the socket reports
                break
            began = _now()
            if began >= deadline:
                ended = _quiet
                break
            sched_yield()  # a thread runnable on this CPU (the broker?) goes first
            if _now() - began > _gave_way:
                ended = _contended
                break
    return ended
