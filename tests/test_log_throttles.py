"""core.log_limits.OncePer: a line a window per key, and no key kept for ever."""

from core.log_limits import OncePer


def test_a_key_is_due_once_per_window_each_key_on_its_own():
    once = OncePer(60)
    assert [once.due("a", at=0), once.due("a", at=59.9), once.due("b", at=30)] == [
        True,
        False,
        True,
    ]
    assert once.due("a", at=60) is True
    assert once.due("b", at=60) is False


def test_a_process_that_runs_for_months_keeps_only_the_recent_keys():
    once = OncePer(60)
    for n in range(5000):  # a key a second: a lost payment each, say
        assert once.due(n, at=float(n)) is True
    assert len(once._last) <= OncePer.KEYS_KEPT + 1
    assert once.due(4999, at=5000.0) is False  # the recent ones are still remembered
    assert once.due(4000, at=5000.0) is True
