"""How often a condition becomes a log line: once per window per key, or on change."""


class OncePer:
    """Whether a line about `key` is due: at most once per `seconds` in this process, so a
    condition met on every request or task is a line a minute, not a flood."""

    # Past this many keys (or twice what the last pruning kept), those whose line is no longer
    # recent are forgotten: a worker that runs for months keeps only the last `seconds`' keys.
    KEYS_KEPT = 1000

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._last: dict[object, float] = {}
        self._prune_above = self.KEYS_KEPT

    def due(self, key: object, *, at: float) -> bool:
        last = self._last.get(key)
        if last is not None and last <= at < last + self.seconds:
            return False
        self._last[key] = at
        if len(self._last) > self._prune_above:
            self._last = {k: t for k, t in self._last.items() if t <= at < t + self.seconds}
            self._prune_above = max(self.KEYS_KEPT, 2 * len(self._last))
        return True


class OnChange:
    """Whether a condition's state differs from the last one seen in this process: an outage
    is a line when it starts and one when it ends, not a line per check."""

    def __init__(self, state: object) -> None:
        self.state = state

    def changed(self, state: object) -> bool:
        if state == self.state:
            return False
        self.state = state
        return True
