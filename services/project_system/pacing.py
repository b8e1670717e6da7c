"""What is left of a company's Procore call budget, as Procore's X-Rate-Limit-* headers last
said, shared by the threads of a process (`LocalBudget`) or the processes of an install
(`RedisBudget`), so the client waits for the window's reset instead of meeting a 429.

Each answer tells the calls left (`X-Rate-Limit-Remaining`) until a moment (`-Reset`, unix
seconds) for whichever limit is nearer, the hourly or the 10-second spike limit. A call takes
one from what is left before it is sent; with nothing left it waits for the reset. Calls still
on their way are not in an answer's count yet, so what is left is the count less those.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import redis

log = logging.getLogger(__name__)
# While Redis does not answer, budgets count in this process alone and try Redis again after
# this long.
REDIS_RETRY_S = 30.0
_away_lock = threading.Lock()
_away: dict[str, Any] = {"since": None, "error": None}


def shared_pacing() -> dict[str, Any]:
    """Whether the Procore budgets this process uses are shared through Redis just now: `ok`
    False (with since when and the error) while Redis is away and each process paces alone."""
    with _away_lock:
        return {"ok": _away["since"] is None, **_away}


def _redis_failed(error: Exception) -> None:
    """Note that Redis did not answer, with a warning in the log the first time."""
    with _away_lock:
        first = _away["since"] is None
        if first:
            _away.update(since=time.time(), error=type(error).__name__)
    if first:
        log.warning("Redis is away (%s): Procore calls are paced by each process alone until it "
                    "answers again; processes together may meet Procore's limit",
                    type(error).__name__)


def _redis_answered() -> None:
    """Note that Redis answers again."""
    with _away_lock:
        back = _away["since"] is not None
        _away.update(since=None, error=None)
    if back:
        log.warning("Redis answers again: Procore calls are paced across processes")


class Budget(Protocol):
    """The calls a company has left until a reset, shared by whoever calls for it."""

    def take(self, now: float) -> float:
        """Take one call (0.0: send it now, then `done`) or say how many seconds until one is
        free (nothing taken)."""
        ...

    def waiting(self, now: float) -> float:
        """How many seconds a call made now would wait for the reset (0.0: none); nothing taken."""
        ...

    def done(self, remaining: int | None, reset: float | None) -> None:
        """A taken call is over; its answer said `remaining` calls until `reset` (unix
        seconds), or said nothing (no answer, or no headers)."""
        ...


class LocalBudget:
    """A company's budget in this process (one client per company serves all its threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._remaining = 0
        self._reset = 0.0
        self._in_flight = 0

    def take(self, now: float) -> float:
        """Take one call (0.0: send it now, then `done`) or say how many seconds until one is
        free (nothing taken)."""
        with self._lock:
            if now < self._reset:
                if self._remaining <= 0:
                    return self._reset - now
                self._remaining -= 1
            # (past the reset nothing is known until an answer says)
            self._in_flight += 1
            return 0.0

    def waiting(self, now: float) -> float:
        """How many seconds a call made now would wait for the reset (0.0: none); nothing taken."""
        with self._lock:
            return self._reset - now if now < self._reset and self._remaining <= 0 else 0.0

    def done(self, remaining: int | None, reset: float | None) -> None:
        """A taken call is over; its answer said `remaining` calls until `reset` (unix
        seconds), or said nothing (no answer, or no headers)."""
        with self._lock:
            self._in_flight = max(self._in_flight - 1, 0)
            if remaining is None or reset is None:
                return
            left = remaining - self._in_flight
            if abs(reset - self._reset) <= SAME_WINDOW_S:
                # Answers of one window may arrive out of order: the lowest count is the
                # truest, and the latest reset the safest.
                self._remaining = min(self._remaining, left)
                self._reset = max(self._reset, reset)
            else:
                self._remaining, self._reset = left, reset


# Resets this close are one window's: Procore's clock (the Date header) comes in whole
# seconds, so one reset read on our clock wanders by up to a second.
SAME_WINDOW_S = 1.5

# Both run inside Redis, so two processes never take the same last call.
_TAKE = """
local now = tonumber(ARGV[1])
local state = redis.call('HMGET', KEYS[1], 'remaining', 'reset')
if state[2] and now < tonumber(state[2]) then
  if tonumber(state[1]) <= 0 then return tostring(tonumber(state[2]) - now) end
  redis.call('HINCRBY', KEYS[1], 'remaining', -1)
end
redis.call('HINCRBY', KEYS[1], 'in_flight', 1)
redis.call('EXPIRE', KEYS[1], 3660)
return '0'
"""
_DONE = """
local in_flight = math.max(redis.call('HINCRBY', KEYS[1], 'in_flight', -1), 0)
redis.call('HSET', KEYS[1], 'in_flight', in_flight)
if ARGV[1] == '' then return 1 end
local left, reset = tonumber(ARGV[1]) - in_flight, tonumber(ARGV[2])
local same = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'remaining', 'reset')
if state[2] then
  local known = tonumber(state[2])
  if math.abs(reset - known) <= same then
    left = math.min(left, tonumber(state[1]))
    reset = math.max(reset, known)
  end
end
redis.call('HSET', KEYS[1], 'remaining', left, 'reset', tostring(reset))
return 1
"""


class RedisBudget:
    """A company's budget shared by every process of the install through Redis (a process
    that dies mid-call leaves its call counted until the key expires, an hour on); while Redis
    does not answer, this process's own `LocalBudget` paces the calls, and Redis is tried again
    every REDIS_RETRY_S."""

    def __init__(self, client: redis.Redis, key: str) -> None:
        import redis  # loaded by whoever made the client; an install without Redis never is

        self._unanswered = redis.RedisError
        self._key = key
        self._client = client
        self._take = client.register_script(_TAKE)
        self._done = client.register_script(_DONE)
        self._local = LocalBudget()
        self._retry_at = 0.0  # monotonic; before it, Redis is not asked

    def _use_local(self) -> bool:
        """Whether Redis was away a moment ago (and is not to be asked yet)."""
        return time.monotonic() < self._retry_at

    def _failed(self, error: Exception) -> None:
        """Pace alone for a while after Redis failed."""
        self._retry_at = time.monotonic() + REDIS_RETRY_S
        _redis_failed(error)

    def take(self, now: float) -> float:
        """Take one call (0.0: send it now, then `done`) or say how many seconds until one is
        free (nothing taken)."""
        if not self._use_local():
            try:
                wait = float(self._take(keys=[self._key], args=[repr(now)]))
            except self._unanswered as error:
                self._failed(error)
            else:
                _redis_answered()
                return wait
        return self._local.take(now)

    def waiting(self, now: float) -> float:
        """How many seconds a call made now would wait for the reset (0.0: none); nothing taken."""
        if self._use_local():
            return self._local.waiting(now)
        try:
            remaining, reset = self._client.hmget(self._key, "remaining", "reset")
        except self._unanswered as error:
            self._failed(error)
            return self._local.waiting(now)
        if reset is None or remaining is None or now >= float(reset) or int(remaining) > 0:
            return 0.0
        return float(reset) - now

    def done(self, remaining: int | None, reset: float | None) -> None:
        """A taken call is over; its answer said `remaining` calls until `reset` (unix
        seconds), or said nothing (no answer, or no headers)."""
        if not self._use_local():
            try:
                self._done(keys=[self._key], args=["" if remaining is None or reset is None
                                                    else str(remaining), repr(reset or 0.0),
                                                    repr(SAME_WINDOW_S)])
                return
            except self._unanswered as error:
                self._failed(error)
        self._local.done(remaining, reset)
