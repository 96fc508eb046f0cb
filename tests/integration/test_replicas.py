# Two tandemd replicas behind one SMG gateway on loopback: both serve, and when one is killed
# mid-load the gateway keeps serving; the only failures are requests the killed one had in flight.
import signal
import threading
import time

import openai
from test_gateway_e2e import CHAT, MODEL, gateway

LOAD_THREADS = 6
KILL_AFTER_S = 3.0
AFTER_KILL_S = 12.0


def served(daemon):
    """Requests the daemon logged as finished."""
    return sum(1 for line in daemon.log().splitlines() if " request " in line and ", " in line
               and " prompt (" in line)


def test_one_replica_killed_mid_load(tandemd, tmp_path):
    a, b = tandemd(), tandemd()
    with gateway([a, b], tmp_path) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0,
                               timeout=60)
        for _ in range(4):
            client.chat.completions.create(model=MODEL, messages=CHAT, temperature=0,
                                           max_tokens=4)
        assert served(a) >= 1 and served(b) >= 1, "round robin should use both replicas"

        results, lock, stop = [], threading.Lock(), threading.Event()

        def load():
            while not stop.is_set():
                started = time.monotonic()
                try:
                    client.chat.completions.create(model=MODEL, messages=CHAT, temperature=0.7,
                                                   max_tokens=48)
                    ok = True
                except openai.APIError:
                    ok = False
                with lock:
                    results.append((started, time.monotonic(), ok))

        threads = [threading.Thread(target=load, daemon=True) for _ in range(LOAD_THREADS)]
        for t in threads:
            t.start()
        time.sleep(KILL_AFTER_S)
        b_during_load = served(b)
        killed_at = time.monotonic()
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait()
        b.stopped = True  # killed on purpose: teardown checks only `a`
        a_before = served(a)
        time.sleep(AFTER_KILL_S)
        stop.set()
        for t in threads:
            t.join(timeout=90)

    assert b_during_load > 4, "the replica to kill served none of the load"
    failed = [r for r in results if not r[2]]
    print(f"replicas: {len(results)} requests, {len(failed)} failed, "
          f"{sum(1 for r in results if r[0] > killed_at)} started after the kill")
    # A request can fail only if it was in flight (or being routed) when the replica died:
    # it started before the kill. Everything started after it succeeds.
    late_failures = [r for r in failed if r[0] > killed_at + 0.5]
    assert not late_failures, f"{len(late_failures)} requests failed after the kill: {failed}"
    assert len(failed) <= LOAD_THREADS
    after = [r for r in results if r[0] > killed_at + 0.5]
    assert len(after) >= LOAD_THREADS, "the surviving replica served too little after the kill"
    assert served(a) > a_before
