"""A stop signal arriving inside a generation call: the call ends within one decoding step,
the partial collect is forgotten, and the resumed run ends exactly where a straight one does."""
import json
import os
import signal

import torch
from test_grpo_trainer import trainer

from relrl.runtime.stop import StopFlag


def test_sigterm_inside_generate_stops_within_one_step_and_resumes_identically(tmp_path):
    settings = dict(max_useful_steps=8, grad_accum=2, save_every=4)
    straight = trainer(tmp_path / "straight", **settings).run()

    out = tmp_path / "killed"
    t = trainer(out, **settings)
    decoder = t.model.get_base_model()  # its forward runs once per decoding step of generate
    seen = {"steps": 0, "after": None}

    def hook(*_):
        if torch.is_grad_enabled():
            return
        seen["steps"] += 1
        if seen["after"] is not None:
            seen["after"] += 1
        elif seen["steps"] == 11:  # inside the second call (calls are up to 8 steps long)
            os.kill(os.getpid(), signal.SIGTERM)
            seen["after"] = 0

    handle = decoder.register_forward_hook(hook)
    with StopFlag() as stop:  # the caller's flag, handed in
        stopped = t.run(stop=stop)
    handle.remove()
    assert stopped["stopped_by"] == "SIGTERM"
    assert seen["after"] == 0  # no decoding step after the one the signal arrived in
    assert 0 < stopped["useful_steps"] < 8 and seen["steps"] < 8 * (stopped["total_attempts"] + 2)
    resumed = trainer(out, **settings).run(resume_from=out / f"checkpoint-{stopped['useful_steps']}")
    assert resumed == straight
    assert (out / "statistics.json").read_bytes() == (tmp_path / "straight" / "statistics.json").read_bytes()
    steps = [json.loads(x)["step"] for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 9))
