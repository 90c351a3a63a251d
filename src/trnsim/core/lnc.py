"""The cores of an LNC 2 launch take turns: one runs at a time, and the turn passes only where a core waits.

Each core's kernel runs in its own thread (the kernel is ordinary Python that calls into the front end),
but the threads never run at once: a core keeps the turn until it waits for its peer (a core barrier, a
sendrecv receive) or ends, and then hands it over. Shared HBM is therefore never written by two cores at
the same moment, and a launch runs in the same order every time, as SimPy's processes do (one runs until it
yields what it waits on). A wait that the other core can never satisfy is a named error, not a hang.
"""
from __future__ import annotations

import threading
from collections import deque

from trnsim.core.errors import DeadlockError

_READY, _RUNNING, _WAITING, _DONE = "ready", "running", "waiting", "done"


class Turns:
    """The turn-taking of the cores of one launch (core 0 starts)."""

    def __init__(self, cores: int, who: str = "core"):
        self.who = who  # what takes turns, as messages name it: the cores of a launch, or its programs
        self.cond = threading.Condition()
        self.turn = 0
        self.state = [_READY] * cores
        self.until = [None] * cores  # what a waiting core waits for

    def start(self, i: int) -> None:
        """Block the calling thread (core i) until its first turn."""
        with self.cond:
            self.cond.wait_for(lambda: self.turn == i)
            self.state[i] = _RUNNING

    def wait(self, i: int, ready, what: str) -> None:
        """Core i waits until `ready()` holds, letting the other cores run meanwhile."""
        with self.cond:
            while not ready():
                nxt = self._next(i)
                if nxt is None:
                    others = ", ".join(f"{self.who} {j} {s}" for j, s in enumerate(self.state) if j != i)
                    raise DeadlockError(f"{self.who} {i} waits for {what}, which can never happen ({others})")
                self.state[i], self.until[i], self.turn = _WAITING, ready, nxt
                self.cond.notify_all()
                self.cond.wait_for(lambda: self.turn == i)
            self.state[i], self.until[i] = _RUNNING, None

    def finish(self, i: int) -> None:
        """Core i has ended (returned or raised): the turn passes on."""
        with self.cond:
            self.state[i] = _DONE
            nxt = self._next(i)
            if nxt is None:  # cores still waiting can never continue: wake them to report it
                nxt = next((j for j, s in enumerate(self.state) if s == _WAITING), i)
            self.turn = nxt
            self.cond.notify_all()

    def _next(self, i: int):
        """The next core after i that can run: not started, or waiting for something that now holds."""
        n = len(self.state)
        for k in range(1, n):
            j = (i + k) % n
            if self.state[j] == _READY or (self.state[j] == _WAITING and self.until[j]()):
                return j
        return None


class Barrier:
    """The core barrier of an LNC 2 pair: each core waits until both have arrived."""

    def __init__(self, turns: Turns, parties: int = 2):
        self.turns, self.parties, self.count, self.generation = turns, parties, 0, 0

    def wait(self, i: int) -> None:
        gen = self.generation
        self.count += 1
        if self.count == self.parties:
            self.count, self.generation = 0, gen + 1
            return
        self.turns.wait(i, lambda: self.generation != gen, "the other core to reach the core barrier")


class Mailbox:
    """Tiles sent to one core (sendrecv), per pipe, in send order."""

    def __init__(self):
        self.pipes: dict = {}

    def put(self, pipe, item) -> None:
        self.pipes.setdefault(pipe, deque()).append(item)

    def get(self, turns: Turns, i: int, pipe):
        box = self.pipes.setdefault(pipe, deque())
        turns.wait(i, lambda: bool(box), f"a tile from the other core on sendrecv pipe {pipe}")
        return box.popleft()
