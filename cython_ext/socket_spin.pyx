# cython: language_level=3
"""Polling one socket for a short window before a reader sleeps (compiled twin).

The pure twin is ``jmspy/_pure/socket_spin.py``; ``tests/test_socket_spin_twins.py`` holds
both to the same behaviour. This one runs the whole window without the GIL: a reader
that polls (``jmspy/idle_spin.py``) leaves the GIL to the program's other threads, where
the pure loop takes it back after every look.
"""

from libc.errno cimport EINTR, errno
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec


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


def poll_for(int fd, double window) -> bool:
    """Poll ``fd`` until it is readable or ``window`` seconds have passed, yielding the CPU
    between looks; True if it became readable (or closed or broke: reading then tells),
    False if the window ran out first. It looks at least once."""
    cdef pollfd p
    cdef int got = 0
    cdef double deadline
    p.fd = fd
    p.events = POLLIN
    p.revents = 0
    with nogil:
        deadline = _now() + window
        while True:
            got = poll(&p, 1, 0)
            if got > 0 or (got < 0 and errno != EINTR):
                break  # readable, or an error that reading the socket will report
            if _now() >= deadline:
                got = 0
                break
            sched_yield()  # a thread runnable on this CPU (the broker?) goes first
    return got != 0
