"""relrl.evaluation.api_client against a real HTTP server on 127.0.0.1 (tests/chat_server.py).

Backoff waits, Retry-After pauses and the per-request deadline run on a fake clock injected
into the client (`sleep`, `clock`), so no test waits for them or measures elapsed time; only
the socket read timeout is real, and only tests that expect it to fire rely on it.
"""
import random
import socket
import threading
import time

import pytest
from chat_server import ChatServer

from relrl.evaluation import api_client as api
from relrl.evaluation.api_jobs import run_jobs
from relrl.runtime.cli import UsageError

CANARY = "sk-or-v1-CANARY-4c0ffee5-test-key"
MESSAGES = [{"role": "user", "content": "What is 6 times 7?"}]


@pytest.fixture
def server():
    with ChatServer(key=CANARY) as srv:
        yield srv


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", CANARY)


class FakeClock:
    """A monotonic clock that only moves when the client sleeps (or by `tick` per reading)."""

    def __init__(self, tick: float = 0.0, during_sleep=None):
        self.now, self.tick, self.sleeps, self.during_sleep = 1000.0, tick, [], during_sleep

    def clock(self) -> float:
        self.now += self.tick
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.during_sleep is not None:
            self.during_sleep(seconds)
        self.now += seconds


def client(server, **kw):
    options = dict(base_url=server.url, backoff=0.05, max_wait=5.0, timeout=5.0, max_retries=3)
    options.update(kw)
    return api.ChatClient("test/model", **options)


# -- a normal call ------------------------------------------------------------------------------
def test_answer_usage_and_cost_come_from_the_response(server):
    c = client(server)
    result = c.chat(MESSAGES, temperature=0.5, max_tokens=None)
    assert result.text == "The answer is \\boxed{42}"
    assert (result.prompt_tokens, result.completion_tokens) == (5, 4)
    assert result.cost_usd == pytest.approx(0.001)
    assert result.attempts == 1 and not result.truncated
    sent = server.seen[0]
    assert sent.authorization == f"Bearer {CANARY}"
    assert sent.body["temperature"] == 0.5 and "max_tokens" not in sent.body  # None: not sent
    assert c.totals.as_dict() == {"requests": 1, "calls": 1, "prompt_tokens": 5,
                                  "completion_tokens": 4, "cost_usd": 0.001,
                                  "calls_without_cost": 0}


def test_extra_body_is_merged_into_every_request(server):
    c = client(server, extra_body={"reasoning": {"effort": "high"}, "provider": {"sort": "price"}})
    c.chat(MESSAGES)
    assert server.seen[0].body["reasoning"] == {"effort": "high"}
    assert server.seen[0].body["provider"] == {"sort": "price"}


def test_cost_from_prices_when_the_server_reports_none(server):
    server.cost_per_call = None
    priced = client(server, price_in=2.0, price_out=10.0).chat(MESSAGES)
    assert priced.cost_usd == pytest.approx((5 * 2.0 + 4 * 10.0) / 1e6)
    unpriced = client(server)
    assert unpriced.chat(MESSAGES).cost_usd is None
    assert unpriced.totals.cost_unknown == 1
    assert "1 calls of unknown cost" in unpriced.totals.line()


def test_garbled_usage_counts_zero(server):
    server.script({"json": {"choices": [{"message": {"content": "ok"}}],
                            "usage": {"prompt_tokens": "many", "completion_tokens": -3,
                                      "cost": "free", "completion_tokens_details": 7}}})
    result = client(server).chat(MESSAGES)
    assert (result.text, result.prompt_tokens, result.completion_tokens) == ("ok", 0, 0)
    assert result.cost_usd is None and result.reasoning_tokens == 0


def test_missing_usage_counts_zero_tokens_and_unknown_cost(server):
    server.report_usage = False
    result = client(server, price_in=1.0, price_out=1.0).chat(MESSAGES)
    assert (result.prompt_tokens, result.completion_tokens, result.cost_usd) == (0, 0, None)


def test_length_cut_is_reported_as_truncated(server):
    server.finish_reason = "length"
    assert client(server).chat(MESSAGES).truncated


# -- retries and backoff ------------------------------------------------------------------------
def test_5xx_is_retried_with_growing_jittered_waits(server):
    server.script({"status": 500}, {"status": 503}, {"status": 502})
    fake = FakeClock()
    result = client(server, backoff=0.05, max_retries=3, seed=7, sleep=fake.sleep,
                    clock=fake.clock).chat(MESSAGES)
    assert result.text.endswith("{42}") and result.attempts == 4
    assert server.count == 4
    # retry k waits backoff * 2**k times a jitter in [0.5, 1) drawn from the client's seed
    rng = random.Random(7)
    assert fake.sleeps == [api.backoff_delay(k, 0.05, 5.0, rng) for k in range(3)]
    for k, wait in enumerate(fake.sleeps):
        assert 0.05 * 2 ** k * 0.5 <= wait < 0.05 * 2 ** k
    assert result.seconds == pytest.approx(sum(fake.sleeps), abs=1e-3)  # on the client's clock


def test_backoff_doubles_is_capped_and_jittered():
    rng = random.Random(1)
    waits = [api.backoff_delay(k, 1.0, 10.0, rng) for k in range(6)]
    for k, wait in enumerate(waits):
        cap = min(10.0, 2.0 ** k)
        assert cap * 0.5 <= wait < cap
    assert len({round(w / min(10.0, 2.0 ** k), 6) for k, w in enumerate(waits)}) > 1  # jitter


def test_gives_up_after_max_retries(server):
    server.script(*[{"status": 500}] * 10)
    with pytest.raises(api.APIError, match="gave up after 3 attempts: HTTP 500") as err:
        client(server, max_retries=2, backoff=0.01).chat(MESSAGES)
    assert not isinstance(err.value, api.FatalAPIError)
    assert server.count == 3


def test_retry_after_is_honoured(server):
    server.script({"status": 429, "retry_after": "0.4"})
    fake = FakeClock()
    result = client(server, backoff=0.001, sleep=fake.sleep, clock=fake.clock).chat(MESSAGES)
    assert result.attempts == 2 and server.count == 2
    assert fake.sleeps == [0.4]  # the server's wait, not the ~1 ms backoff


def test_retry_after_pauses_the_other_workers_too(server):
    server.script({"status": 429, "retry_after": "0.5"})
    seen = []  # (requests the server had received, wait) at each sleep

    def second_worker(seconds):
        seen.append((server.count, seconds))
        if len(seen) == 1:  # while the first worker waits, another one starts a request
            c.chat(MESSAGES)

    fake = FakeClock(during_sleep=second_worker)
    c = client(server, backoff=0.001, workers=2, sleep=fake.sleep, clock=fake.clock)
    c.chat(MESSAGES)
    # the second worker waited the whole pause before sending anything
    assert seen == [(1, 0.5), (1, 0.5)]
    assert server.count == 3


def test_retry_after_longer_than_max_wait_stops_with_a_clear_error(server):
    server.script({"status": 429, "retry_after": "3600"})
    with pytest.raises(api.APIError, match="asks to wait 3600 s"):
        client(server, max_wait=5.0).chat(MESSAGES)
    assert server.count == 1


def test_retry_after_parsing():
    assert api.parse_retry_after("2") == 2.0
    assert api.parse_retry_after("0.25") == 0.25
    assert api.parse_retry_after(None) is None and api.parse_retry_after("soon") is None
    now = 1_700_000_000.0
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now + 30))
    assert api.parse_retry_after(future, now=lambda: now) == 30.0
    assert api.parse_retry_after(future, now=lambda: now + 60) == 0.0  # already passed


def test_malformed_json_is_retried_then_reported(server):
    server.script({"malformed": True})
    assert client(server).chat(MESSAGES).attempts == 2
    server.script(*[{"malformed": True}] * 3)
    with pytest.raises(api.MalformedResponse, match="malformed JSON"):
        client(server, max_retries=2, backoff=0.01).chat(MESSAGES)


def test_an_error_inside_a_200_body_is_retried(server):
    server.script({"inband": 502})
    assert client(server).chat(MESSAGES).attempts == 2


def test_connection_refused_is_retried_then_reported():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    c = api.ChatClient("m", base_url=f"http://127.0.0.1:{port}/v1", backoff=0.01, max_retries=2)
    with pytest.raises(api.APIError, match="gave up after 3 attempts: connection to"):
        c.chat(MESSAGES)
    assert c.totals.requests == 3


# -- timeouts -----------------------------------------------------------------------------------
def test_a_hanging_server_is_abandoned_after_the_timeout(server):
    server.script({"hang": True}, {"hang": True})
    with pytest.raises(api.APIError, match="no complete answer within 0.2 s"):
        client(server, timeout=0.2, max_retries=1, backoff=0.01).chat(MESSAGES)
    assert server.count == 2
    assert server.in_flight == 2  # the server still holds both: the client gave up by itself


def test_a_body_that_stops_coming_is_abandoned_after_the_timeout(server):
    server.script({"stall": True})
    # the read timeout is real: long enough for the retry's answer on a busy machine
    result = client(server, timeout=1.0, max_retries=1, backoff=0.01).chat(MESSAGES)
    assert result.attempts == 2 and server.count == 2
    assert server.in_flight >= 1  # the stalled answer is still held open


def test_a_connection_closed_mid_body_is_retried(server):
    server.script({"drop": True})
    result = client(server, backoff=0.01).chat(MESSAGES)
    assert result.attempts == 2 and result.text.endswith("{42}")


def test_a_200_without_choices_is_retried(server):
    server.script({"json": {"id": "x", "choices": []}}, {"json": {"id": "y"}})
    assert client(server, backoff=0.01).chat(MESSAGES).attempts == 3


def test_a_trickling_body_is_abandoned_after_the_timeout(server):
    # One byte every 50 ms keeps each socket read under the timeout; the whole body would take
    # minutes. The per-request deadline must still end it: on the fake clock every reading
    # moves time on by 1 s, so the 5 s deadline passes after a few bytes whatever the load.
    server.script({"trickle": 0.05})
    fake = FakeClock(tick=1.0)
    result = client(server, timeout=5.0, max_retries=1, backoff=0.01, sleep=fake.sleep,
                    clock=fake.clock).chat(MESSAGES)
    assert result.attempts == 2 and server.count == 2
    assert not server.release.is_set()


# -- errors no retry can fix ------------------------------------------------------------------
def test_401_is_not_retried_and_the_echoed_key_is_not_shown(server, capfd):
    server.key = "a-different-key"  # the server rejects ours and echoes it back in the body
    with pytest.raises(api.FatalAPIError, match="HTTP 401 .* API key was rejected") as err:
        client(server).chat(MESSAGES)
    assert server.count == 1
    assert isinstance(err.value, UsageError)  # scripts turn it into exit status 2
    out, errors = capfd.readouterr()
    assert CANARY not in str(err.value) + repr(err.value) + out + errors


def test_403_is_not_retried(server):
    server.script({"status": 403})
    with pytest.raises(api.FatalAPIError, match="HTTP 403"):
        client(server).chat(MESSAGES)
    assert server.count == 1


def test_402_out_of_credits_stops(server):
    server.script({"status": 402, "message": "Insufficient credits"})
    with pytest.raises(api.FatalAPIError, match="out of credits: Insufficient credits"):
        client(server).chat(MESSAGES)
    assert server.count == 1


def test_unknown_model_is_a_clear_error_without_retry(server):
    server.models = {"known/model"}
    with pytest.raises(api.FatalAPIError, match=r"HTTP 404: unknown model 'test/model' at .*"
                                                r"wrong --base-url\): model test/model not found"):
        client(server).chat(MESSAGES)
    assert server.count == 1


def test_other_client_errors_fail_the_item_only(server):
    server.script({"status": 400, "message": "context too long"})
    with pytest.raises(api.APIError, match="HTTP 400: context too long") as err:
        client(server).chat(MESSAGES)
    assert not isinstance(err.value, api.FatalAPIError) and server.count == 1


def test_server_text_is_redacted(server):
    server.script({"status": 400, "message": f"bad request from key {CANARY}"})
    with pytest.raises(api.APIError) as err:
        client(server).chat(MESSAGES)
    assert CANARY not in str(err.value) and api.REDACTED in str(err.value)


def test_missing_key_names_the_variable(monkeypatch, server):
    monkeypatch.delenv("OPENROUTER_API_KEY")
    with pytest.raises(api.FatalAPIError, match="OPENROUTER_API_KEY is not set"):
        client(server)
    monkeypatch.setenv("MY_KEY", CANARY)
    assert client(server, key_env="MY_KEY").chat(MESSAGES).text
    assert server.count == 1


def test_a_key_given_as_the_variable_name_is_not_echoed(server):
    with pytest.raises(UsageError) as err:
        client(server, key_env=CANARY)
    assert CANARY not in str(err.value)


def test_no_key_mode_sends_no_authorization(server):
    server.key = None
    client(server, key_env="none").chat(MESSAGES)
    assert server.seen[0].authorization is None


def test_repr_hides_the_key(server):
    c = client(server)
    assert CANARY not in repr(c) and CANARY not in str(vars(c).get("model"))


def test_bad_base_url_is_a_usage_error():
    with pytest.raises(UsageError, match="--base-url"):
        api.ChatClient("m", base_url="openrouter.ai/api/v1")


# -- many calls ---------------------------------------------------------------------------------
def test_run_jobs_bounds_concurrency_and_saves_in_the_calling_thread(server):
    c = client(server, workers=3)
    saved, threads = [], set()

    def save(job, result):
        saved.append(job)
        threads.add(threading.get_ident())

    report = run_jobs(range(12), lambda job: c.chat(MESSAGES), save, workers=3)
    assert sorted(saved) == list(range(12)) and report.done == 12 and not report.failures
    assert server.count == 12 and 1 <= server.max_in_flight <= 3
    assert threads == {threading.get_ident()}


def test_run_jobs_stops_on_a_fatal_error_and_keeps_what_was_paid_for(server):
    c = client(server)
    saved = []

    def save(job, result):
        saved.append(job)
        if len(saved) == 2:
            server.key = "revoked"  # the next request is refused

    with pytest.raises(api.FatalAPIError, match="401"):
        run_jobs(range(10), lambda job: c.chat(MESSAGES), save, workers=1)
    assert saved == [0, 1] and server.count == 3  # nothing sent after the 401


def test_run_jobs_records_item_failures_and_stops_when_the_service_is_down(server):
    server.script({"status": 400}, *[{"status": 500}] * 20)
    c = client(server, max_retries=0)
    report = run_jobs(range(10), lambda job: c.chat(MESSAGES), lambda j, r: None,
                      workers=1, max_consecutive_failures=3)
    assert [job for job, _ in report.failures] == [0, 1, 2]
    assert "3 requests in a row failed" in report.stopped and server.count == 3


def test_run_jobs_draws_no_job_once_told_to_stop(server):
    c = client(server)
    saved = []
    run_jobs(range(10), lambda job: c.chat(MESSAGES), lambda j, r: saved.append(j),
             workers=2, should_stop=lambda in_flight: len(saved) + in_flight >= 4)
    assert len(saved) == 4 and server.count == 4


@pytest.mark.parametrize("where", ["submitting", "saving"])
def test_ctrl_c_outside_the_wait_still_saves_the_answers_in_flight(where):
    """Ctrl-C can land while the next request is being submitted or an answer saved, not only
    while the loop waits: the answers already requested are saved either way."""
    started, release = threading.Event(), threading.Event()

    def work(job):
        if job == 1:
            started.set()
            release.wait(10)
        return f"answer {job}"

    saved = []

    def save(job, result):
        saved.append((job, result))
        if where == "saving" and job == 0:  # Ctrl-C while answer 0 is saved, 1 in flight
            release.set()
            raise KeyboardInterrupt

    def should_stop(in_flight):
        if where == "submitting" and started.is_set():  # Ctrl-C while submitting job 2
            release.set()
            raise KeyboardInterrupt
        return False

    with pytest.raises(KeyboardInterrupt):
        run_jobs(range(4), work, save, workers=2, should_stop=should_stop)
    assert (1, "answer 1") in saved
