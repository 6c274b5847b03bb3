"""The one state-machine idiom of payins, payouts, refunds, transfers and KYC: a table of allowed
moves and `transition_locked`, which checks a move of a locked row, writes its columns and its
history row, then applies the move's small named effects (ledger postings, events)."""

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from django.db import models

from core.exceptions import DomainError

Row = TypeVar("Row", bound=models.Model)
# An effect of a move: effect(row, at=..., reason=...), after the row and its history are written.
Effect = Callable[..., None]


class InvalidTransition(DomainError):
    """The one invalid_transition: a payment's or a transfer's status does not allow the move
    (a state machine's, or a support action's); each raise says which in its message."""

    status = 409
    reason = "invalid_transition"
    message = "The resource cannot move to that status."


def _status(row: Any) -> Hashable:
    return row.status


@dataclass(frozen=True)
class StateMachine:
    """A state machine: `allowed` maps a state to the moves it allows; `refused(row, was, move)`
    is the error of any other move; `history(row, was=, reason=, at=)` writes a move's history
    row; `effects[move]` are applied in order after it. `state(row)` reads the row's state."""

    allowed: Mapping[Hashable, Collection[Hashable]]
    refused: Callable[[Any, Hashable, Hashable], Exception]
    history: Callable[..., None]
    effects: Mapping[Hashable, Sequence[Effect]] = field(default_factory=dict)
    state: Callable[[Any], Hashable] = _status


def transition_locked(
    row: Row,
    *,
    machine: StateMachine,
    move: Hashable,
    changes: Mapping[str, object],
    at: datetime,
    reason: str = "",
    kept: Collection[str] = (),
    context: Mapping[str, object] | None = None,
) -> Row:
    """Apply `move` to a row the caller's transaction has locked: refuse it unless
        `machine.allowed` has it, set `changes` (status, times), save them with the `kept` columns
        already set on the row, write the history row (given `context`: who or what made the move),
    then apply the move's effects."""
    was = machine.state(row)
    if move not in machine.allowed.get(was, ()):
        raise machine.refused(row, was, move)
    for name, value in changes.items():
        setattr(row, name, value)
    row.save(update_fields=sorted({*kept, *changes}))
    machine.history(row, was=was, reason=reason, at=at, **(context or {}))
    for effect in machine.effects.get(move, ()):
        effect(row, at=at, reason=reason)
    return row
