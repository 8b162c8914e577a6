"""iobo.interrupts: a step that SIGINT or SIGTERM must not cut in half (real signals sent to this process)."""

import os
import signal
import threading

import pytest

from iobo.interrupts import interrupts_deferred, not_interrupted


def test_a_sigint_inside_the_block_acts_when_it_ends(sigint_handler):
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("after the signal")
    assert steps == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_nested_blocks_deliver_it_once_after_the_outer_one(sigint_handler):
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            with interrupts_deferred():
                os.kill(os.getpid(), signal.SIGINT)
            steps.append("outer goes on")
    assert steps == ["outer goes on"]


def test_sigterm_reaches_the_handler_in_place_after_the_block():
    got = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            assert got == []
        assert got == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("sigint_handler", [signal.SIG_IGN], indirect=True)
def test_an_ignored_sigint_stays_ignored(sigint_handler):
    with interrupts_deferred():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGINT)


def test_outside_the_main_thread_it_changes_nothing(sigint_handler):
    seen = []

    def run():
        with interrupts_deferred():
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [signal.default_int_handler]


def test_a_method_marked_not_interrupted_returns_its_value_before_the_interrupt(sigint_handler):
    done = []

    @not_interrupted
    def step(x):
        os.kill(os.getpid(), signal.SIGINT)
        done.append(x)
        return x * 2

    with pytest.raises(KeyboardInterrupt):
        step(3)
    assert done == [3]
