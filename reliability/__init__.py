"""The reliability suite: the crash, damage, fault, contention and fuzz tests in ``tests/``,
run at a chosen scale, with the figures they record gathered into ``docs/reliability.md``.

``record`` is what the tests call; ``python -m reliability`` runs them and writes the report.
"""

from reliability.record import OUT_ENV, knob, record

__all__ = ["OUT_ENV", "knob", "record"]
