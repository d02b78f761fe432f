"""One session, 8 Python threads at once: the results equal serial runs."""

import sys
import threading
import time

import numpy as np

import kiln


def test_concurrent_runs_equal_serial(demo_model):
    s = kiln.Session(demo_model)
    rng = np.random.default_rng(3)
    xs = [rng.random((2, 1, 28, 28), dtype=np.float32) for _ in range(8)]
    serial = [s.run({"image": x}) for x in xs]
    results = [[None] * 10 for _ in xs]
    errors = []
    start = threading.Barrier(len(xs))

    def work(i):
        try:
            start.wait()
            for k in range(10):
                results[i][k] = s.run({"image": xs[i]})
        except Exception as e:  # reported below; a thread cannot fail the test itself
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, runs in enumerate(results):
        for out in runs:
            np.testing.assert_array_equal(out["probabilities"], serial[i]["probabilities"])
            np.testing.assert_array_equal(out["label"], serial[i]["label"])


def test_gil_is_released_during_run(demo_model):
    # With a switch interval of 5 s the main thread keeps the GIL unless it
    # releases it, so the ticker thread can tick during a run only if run()
    # releases the GIL.
    s = kiln.Session(demo_model)
    x = np.random.default_rng(4).random((256, 1, 28, 28), dtype=np.float32)
    ticks = []
    stop = threading.Event()
    started = threading.Event()

    def ticker():
        started.set()
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.0002)

    old = sys.getswitchinterval()
    t = threading.Thread(target=ticker)
    t.start()
    started.wait()
    sys.setswitchinterval(5.0)
    try:
        before = len(ticks)
        for _ in range(5):  # ~40 ms each on a 2-core machine
            s.run({"image": x})
        during = len(ticks) - before
    finally:
        sys.setswitchinterval(old)
        stop.set()
        t.join()
    assert during > 0
