"""Adaptive busy-polling: whether a reader that is about to sleep until its socket has
input polls it for a short while first, and for how long.

Why: a request/response exchange (one message in flight, a RECEIPT awaited) is a
ping-pong in which each side sleeps while the other works. Every sleep ends in a wakeup:
a context switch, and on a virtual machine whose idle vCPU halts, an exit to the
hypervisor and back, then a run that starts on a cold cache. Measured on a 2-vCPU VM
(``python -m benchmarks.cpu_split --workload w1``; benchmarks/README.md, "Polling before
sleeping"): the jmspy broker and a jmspy consumer at window 1 spent 80-100 us of CPU
each per message, where the broker's work is 15 us; with both sides polling for up to
100 us before they sleep, neither sleeps, and the pair went from about 6,000 to
10,000-16,000 messages a second.

Why adaptive: polling pays only when the other side answers within the window. A side
that answers later, or an idle connection, would have every window burnt (measured: a
jmspy consumer spinning a fixed 50 us on every wait against ActiveMQ and RabbitMQ at
window 1 used 130 us of CPU per message instead of 80; with this rule and 100 us it polls
there only while they do answer in time, and ran faster than without polling). So a
window that ends without input is a
*miss*, after which the reader sleeps at once for the next 1, then 2, 4, ... up to
:data:`MAX_SKIP` waits (misses in a row double it), probing again after each run of
skipped waits. A window that finds input (a *hit*) keeps the reader polling and halves
what the next miss skips, so a side that answers quickly again is polled for again
within a few hits, while the odd quick answer among slow ones is not. On a connection
that goes quiet it costs one window per burst of traffic and then almost nothing: one
probe in :data:`MAX_SKIP` waits.

Why the window grows: a broker that answers a little later than the window (RabbitMQ at
window 1 takes 150-300 us to turn an ACK into the next MESSAGE) would have every window
miss and the reader sleep every time, though a slightly longer window would have caught
each answer. So the window is sized the way KVM sizes its halt polling (``halt_poll_ns``
grows after a halt shorter than its limit and falls back after a longer one): a wait that
polled in vain or slept at once, and had its input within :data:`GROWTH` times the
configured window (:meth:`IdleSpin.waited`), doubles the window up to that limit and ends
the skipping; a longer wait puts the window back to the configured one. Measured on the
2-vCPU VM (``cpu_split --workload w1``, a jmspy consumer at window 1, 5 rounds,
alternated with the fixed window): 4,654 against 3,320 msgs/s on RabbitMQ, 5,523
against 5,080 on ActiveMQ, 9,936 against 10,012 on the jmspy broker, whose answers the
fixed window already caught. The price, paid only while answers come that soon: on
RabbitMQ the consumer spent 176 us of CPU per message instead of 101, polling where it
used to sleep. Only a reader that takes one message at a time may grow its window (the
``stomp://`` reading turn asks its transport: every subscription at window 1): with more
in flight, frames come in runs, and longer polls between runs took CPU from the broker
feeding them (window 1000 on RabbitMQ, jmspy / raw stomp.py: 0.98-1.11 with every reader
growing, 1.11 and 1.24 with only window-1 readers, in alternated runs of part b).

Why a yield ends the window: polling is worth it only on a CPU nobody else wants. On a
machine with more busy threads than CPUs (measured: raw stomp.py's producer, whose two
threads wait on each other for every RECEIPT, and a consumer, all on a 2-vCPU VM with the
broker) a polling broker kept a vCPU from them: receipt ``ack:client`` went from 4,418 to
3,661 messages a second, the broker's CPU from 125 to 177 us per message. A poller yields
the CPU between looks; a yield that takes longer than :data:`GAVE_WAY_S` means another
thread ran on this CPU meanwhile, so the window ends there, *contended*
(:meth:`IdleSpin.contended`), and the waits after it sleep as after a miss. Afterwards
the same row ran as fast with polling on as off, and window 1, where the other vCPU is
idle, kept its gain.

The policy is here, apart from any socket or loop, so the rule is one object with no I/O
(tests drive it directly); the broker's event loop (``jmspy.broker_ref.protocols.stomp.
loop_polling``) and the ``stomp://`` transport's reading turn
(``jmspy.transports.reading_turn``) each poll their own way and ask it
:meth:`IdleSpin.window` before they sleep.
"""

from __future__ import annotations

__all__ = ["CONTENDED", "DEFAULT_IDLE_SPIN_US", "GAVE_WAY_S", "GROWTH", "MAX_IDLE_SPIN_US",
           "MAX_SKIP", "QUIET", "READABLE", "IdleSpin"]

#: The window in microseconds unless configured: long enough for a jmspy broker's turn
#: around at window 1 (about 20-40 us of work each side, measured), short enough that a
#: miss costs little.
DEFAULT_IDLE_SPIN_US = 100
#: Longest window accepted: past a millisecond a poller is a busy loop, not a wait.
MAX_IDLE_SPIN_US = 1000
#: How many times the configured window a window may grow to (never past
#: :data:`MAX_IDLE_SPIN_US`): 400 us at the default, which covers RabbitMQ's turn-around
#: at window 1 (a limit of 200 us measured no gain there).
GROWTH = 4
#: Most waits slept through without a probe after consecutive misses.
MAX_SKIP = 256
#: A yield that kept the poller off the CPU longer than this ran another thread: a yield
#: with nobody else to run returns in about a microsecond (a system call), while one that
#: hands the CPU over lasts at least that thread's run, tens of microseconds and more.
GAVE_WAY_S = 10e-6

#: How a polling window ended (the STOMP transport's ``socket_poll.poll_for`` returns these):
#: with input (a hit), with its time up and none (a miss), or with the CPU given to
#: another thread by a yield (contended).
QUIET = 0
READABLE = 1
CONTENDED = 2


class IdleSpin:
    """Adaptive spin-then-sleep for one reader (one thread or one event loop).

    ``window()`` before a wait: seconds to poll first (0.0: sleep at once). Then
    ``hit()`` if input arrived within that window, ``miss()`` if it did not,
    ``contended()`` if a yield in it gave the CPU to another thread. A reader that can
    time its waits reports, after one that missed or slept at once, how long it lasted
    (``waited()``), and the window grows to catch such answers.
    ``window_us`` 0 turns polling off.
    """

    __slots__ = ("_backoff", "_base_s", "_max_s", "_skip", "contentions", "grown", "hits",
                 "misses", "window_s")

    def __init__(self, window_us: int = DEFAULT_IDLE_SPIN_US) -> None:
        if (not isinstance(window_us, int) or isinstance(window_us, bool)
                or not 0 <= window_us <= MAX_IDLE_SPIN_US):
            raise ValueError(
                f"idle spin {window_us!r} us: use a whole number of microseconds from 0 "
                f"(off) to {MAX_IDLE_SPIN_US} (default {DEFAULT_IDLE_SPIN_US})")
        #: the polling window in seconds (0.0: off): the configured one, or more after
        #: :meth:`waited` grew it
        self.window_s = window_us / 1e6
        self._base_s = self.window_s
        self._max_s = min(window_us * GROWTH, MAX_IDLE_SPIN_US) / 1e6
        self._backoff = 0  # waits skipped after the latest miss (doubles per miss in a row)
        self._skip = 0  # waits still to sleep through without polling
        #: windows that found input, that did not, and that another thread's need for
        #: the CPU ended (diagnostics, tests)
        self.hits = 0
        self.misses = 0
        self.contentions = 0
        #: waits after which the window doubled (diagnostics, tests)
        self.grown = 0

    @property
    def enabled(self) -> bool:
        return self.window_s > 0.0

    def window(self) -> float:
        """Seconds to poll before this wait sleeps (0.0: sleep now)."""
        if self._skip:
            self._skip -= 1
            return 0.0
        return self.window_s

    def hit(self) -> None:
        """The window found input: keep polling, and halve how many waits the next miss
        skips (a lone hit among misses does not make every wait poll again)."""
        self.hits += 1
        self._backoff //= 2

    def miss(self) -> None:
        """The window passed without input: sleep through the next waits, twice as many
        as after the previous miss in a row (at most :data:`MAX_SKIP`)."""
        self.misses += 1
        self._back_off()

    def contended(self) -> None:
        """A yield in the window gave the CPU to another thread: this CPU is wanted, and
        polling on would take it from a thread with work to do. The window ends, and the
        waits after it sleep as after a miss (doubling in a row with misses)."""
        self.contentions += 1
        self._back_off()

    def waited(self, seconds: float) -> None:
        """A wait that polled without input (a miss) or slept at once (a skipped wait)
        ended after ``seconds`` in all, window included; not called after a contended
        window (the CPU is wanted: no reason to poll longer).

        Within :data:`GROWTH` times the configured window, a longer window would have
        caught the input: the window doubles (up to that limit) and the waits still to be
        skipped are polled again. A longer wait, an idle spell or a slow broker, puts the
        window back to the configured one; the skipping after misses goes on as it was."""
        if not self._base_s:
            return
        if seconds <= self._max_s:
            if self.window_s < self._max_s:
                self.window_s = min(self._max_s, self.window_s * 2)
                self.grown += 1
            self._skip = 0
            self._backoff //= 2
        else:
            self.window_s = self._base_s

    def settle(self) -> None:
        """Back to the configured window: the reader no longer takes one message at a
        time (a streaming subscription joined it), where a grown window would only poll
        longer between runs of frames."""
        self.window_s = self._base_s

    def _back_off(self) -> None:
        self._backoff = min(MAX_SKIP, self._backoff * 2 or 1)
        self._skip = self._backoff
