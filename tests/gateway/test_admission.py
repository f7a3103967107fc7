"""The admission rules of one slot, as a table: what each method allows from each state."""

from __future__ import annotations

import pytest

from llamad.gateway.admission.rules import AdmissionError, Slot, StopWhy


def busy(**fields: int) -> Slot:
    slot = Slot("m")
    for key, value in fields.items():
        setattr(slot, key, value)
    return slot


@pytest.mark.parametrize(
    ("slot", "claims"),
    [
        (busy(), True),
        (busy(in_flight=1), False),
        (busy(waiting=1), False),
        (busy(drains=1), False),
    ],
    ids=["idle", "in flight", "waiting", "draining"],
)
def test_a_stop_is_claimed_only_when_nothing_uses_the_model(slot: Slot, claims: bool) -> None:
    assert slot.claim_stop(StopWhy.IDLE) is claims


def test_a_claimed_stop_admits_nothing_and_a_second_claim_fails() -> None:
    slot = Slot("m")
    assert slot.claim_stop(StopWhy.EVICT)
    assert not slot.admits
    assert not slot.claim_stop(StopWhy.IDLE)
    with pytest.raises(AdmissionError):
        slot.admit(0.0, 1, None)
    slot.end_stop()
    assert slot.admit(0.0, 1, None) is slot


def test_release_and_dequeue_never_count_below_zero() -> None:
    slot = Slot("m")
    with pytest.raises(AdmissionError):
        slot.release(0.0)
    with pytest.raises(AdmissionError):
        slot.dequeue()
    with pytest.raises(AdmissionError):
        slot.end_drain()


def test_the_queue_is_bounded() -> None:
    slot = Slot("m")
    assert slot.enqueue(1)
    assert not slot.enqueue(1)
    assert slot.dequeue()


def test_an_unload_while_busy_waits_for_the_last_request_and_happens_once() -> None:
    slot = Slot("m")
    slot.admit(0.0, 1, None)
    assert not slot.ask_unload()
    assert slot.unload_pending
    assert slot.release(1.0)
    assert slot.ask_unload()  # the caller stops it now
    assert not slot.unload_pending
    slot.end_stop()
    slot.admit(2.0, 2, None)
    slot.release(3.0)
    assert not slot.unload_pending


def test_keep_alive_zero_asks_for_an_unload_and_other_values_hold_for_the_process() -> None:
    slot = Slot("m")
    slot.admit(0.0, 7, 0)
    assert slot.unload_pending
    assert slot.keep_alive is None
    slot.admit(0.0, 7, 30.0)
    assert slot.timeout(600.0, 7) == 30.0
    assert slot.timeout(600.0, 8) == 600.0
    slot.admit(0.0, 7, -1.0)
    assert slot.timeout(600.0, 7) is None


def test_a_drain_holds_admission_and_is_counted() -> None:
    slot = Slot("m")
    slot.begin_drain()
    slot.begin_drain()
    assert not slot.admits
    assert slot.drained == 2
    slot.end_drain()
    assert not slot.admits
    slot.end_drain()
    assert slot.admits
