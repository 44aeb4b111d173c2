"""vLLM's scheduler driven one step at a time: turns go in through LLM.enqueue between any two
steps, LLMEngine.step advances every running request by one token (or a whole prompt), and
the turns a step ended come out. Both the rounds (VLLMEngine.sample_round) and the
asynchronous tool loop (relrl.engines.tool_loop.run_async) sample through a VLLMTurns.

The calls below LLM.generate made here are checked at engine start (vllm.INTERNAL_CALLS).
"""
from __future__ import annotations

from relrl.engines.tool_loop import Request


class VLLMTurns:
    """A TurnStream (relrl.engines.tool_loop) over one VLLMEngine, for one generate call's
    sampling settings; each step is counted on the engine (engine.steps)."""

    def __init__(self, engine, sampling):
        self.engine, self.sampling = engine, sampling
        self.lora = None if engine._base else engine.lora  # fixed for the call
        self.core = engine.llm.llm_engine
        self.keys: dict[str, int] = {}  # vLLM's request id (and our prefix of it) -> key
        self.running: list[str] = []    # vLLM's ids in flight, for abort

    def submit(self, keys: list[int], requests: list[Request]) -> None:
        params = [self.engine._params(self.sampling, r.seed, r.max_tokens) for r in requests]
        ids = self.engine.llm.enqueue([{"prompt_token_ids": r.ids} for r in requests], params,
                                      lora_request=self.lora, use_tqdm=False)
        # outputs carry the id we gave; enqueue returns vLLM's "<ours>-<uuid8>" internal ids
        for key, rid in zip(keys, ids, strict=True):
            self.keys[rid] = self.keys[rid.rsplit("-", 1)[0]] = key
        self.running += ids

    def busy(self) -> bool:
        return self.core.has_unfinished_requests()

    def step(self) -> list[tuple[int, list[int], list[float]]]:
        ended = []
        for out in self.core.step():
            if not out.finished:
                continue
            sample = out.outputs[0]
            tokens = list(sample.token_ids)
            logprobs = [step[t].logprob for step, t in zip(sample.logprobs, tokens)]
            ended.append((self._key(str(out.request_id)), tokens, logprobs))
        self.engine.steps += 1
        return ended

    def _key(self, request_id: str) -> int:
        key = self.keys.get(request_id)
        if key is None:  # the id format is vLLM's own business: say which one broke it
            raise self.engine.unknown_request(request_id)
        return key

    def abort(self) -> None:
        if self.running:
            self.core.abort_request(self.running, internal=True)
        self.running = []
