"""The runner's parallelism semaphore: a poll reserves the free slots, jobs give them back."""

from __future__ import annotations

import threading
import time

import pytest
from baton_worker._slots import Slots


def test_acquire_takes_what_is_asked_when_enough_is_free() -> None:
    slots = Slots(8)
    assert slots.acquire_up_to(3) == 3
    assert (slots.in_use, slots.free) == (3, 5)


def test_acquire_takes_only_the_free_slots() -> None:
    slots = Slots(4)
    assert slots.acquire_up_to(3) == 3
    assert slots.acquire_up_to(10) == 1
    assert slots.free == 0


def test_unused_reservations_go_back() -> None:
    slots = Slots(4)
    taken = slots.acquire_up_to(4)
    slots.release(taken - 1)  # the poll returned one job
    assert slots.in_use == 1


def test_acquire_waits_for_a_release_when_all_slots_are_busy() -> None:
    slots = Slots(2)
    slots.acquire_up_to(2)
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(slots.acquire_up_to(5)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive(), "acquire returned while every slot was busy"
    slots.release(1)
    waiter.join(5)
    assert got == [1]


def test_acquire_gives_up_after_its_timeout() -> None:
    slots = Slots(1)
    slots.acquire_up_to(1)
    began = time.monotonic()
    assert slots.acquire_up_to(1, timeout=0.1) == 0
    assert time.monotonic() - began >= 0.09


def test_interrupt_wakes_a_waiting_acquire_empty_handed() -> None:
    slots = Slots(1)
    slots.acquire_up_to(1)
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(slots.acquire_up_to(1)))
    waiter.start()
    slots.interrupt()
    waiter.join(5)
    assert got == [0]
    assert slots.acquire_up_to(1, timeout=0) == 0  # and stays interrupted


def test_wait_idle_returns_once_every_slot_is_back() -> None:
    slots = Slots(3)
    slots.acquire_up_to(3)
    assert not slots.wait_idle(timeout=0.05)
    releaser = threading.Timer(0.05, lambda: slots.release(3))
    releaser.start()
    assert slots.wait_idle(timeout=5)
    releaser.join()


def test_releasing_more_than_taken_is_a_bug() -> None:
    slots = Slots(2)
    slots.acquire_up_to(1)
    with pytest.raises(ValueError):
        slots.release(2)


def test_many_threads_never_exceed_the_capacity() -> None:
    slots = Slots(3)
    peak = 0
    lock = threading.Lock()
    done = 0

    def worker() -> None:
        nonlocal peak, done
        for _ in range(50):
            n = slots.acquire_up_to(2)
            with lock:
                peak = max(peak, slots.in_use)
            slots.release(n)
        with lock:
            done += 1

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert done == 6
    assert peak <= 3
    assert slots.in_use == 0


# --- gathering freed slots while jobs run (RunnerOptions.gather_interval) ------------------------


def test_gathering_takes_the_slots_that_free_up_within_the_interval() -> None:
    slots = Slots(8)
    slots.acquire_up_to(8)  # eight jobs running
    slots.release(1)  # one finishes
    got: list[int] = []
    waiter = threading.Thread(
        target=lambda: got.append(slots.acquire_up_to(8, gather=10.0, enough=4))
    )
    waiter.start()
    for _ in range(3):  # three more finish while it gathers
        waiter.join(0.05)
        assert waiter.is_alive(), "stopped gathering with fewer than enough slots free"
        slots.release(1)
    waiter.join(5)
    assert got == [4]  # one poll for four jobs, not four polls for one


def test_gathering_ends_at_its_interval_with_what_is_free() -> None:
    slots = Slots(8)
    slots.acquire_up_to(8)
    slots.release(1)
    began = time.monotonic()
    assert slots.acquire_up_to(8, gather=0.1, enough=4) == 1
    assert 0.09 <= time.monotonic() - began < 2


def test_an_idle_runner_does_not_gather() -> None:
    """Nothing running, nothing will free up: the poll goes out at once (dispatch latency)."""
    slots = Slots(8)
    began = time.monotonic()
    assert slots.acquire_up_to(2, gather=10.0, enough=4) == 2
    assert time.monotonic() - began < 1


def test_interrupt_ends_gathering_empty_handed() -> None:
    slots = Slots(4)
    slots.acquire_up_to(4)
    slots.release(1)
    got: list[int] = []
    waiter = threading.Thread(
        target=lambda: got.append(slots.acquire_up_to(4, gather=10.0, enough=4))
    )
    waiter.start()
    waiter.join(0.05)
    slots.interrupt()
    waiter.join(5)
    assert got == [0]
