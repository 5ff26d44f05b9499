"""The Python API: a vLLM engine with routing capture and a policy in shadow mode.

    from mpl.vllm import PolicyRunner
    runner = PolicyRunner(model="path/to/model", policy="policy.moe", hardware="rtx-4090")
    result = runner.generate(["Hello"], max_tokens=32)
    result.texts, result.stats, result.trace
    runner.close()

Must run under ``if __name__ == "__main__":`` (vLLM spawns its engine process).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from mpl.trace import Trace

from .errors import PREFLIGHT, VllmIntegrationError

EXTENSION = "mpl.vllm.session.MplWorkerExtension"


@dataclass
class Result:
    texts: list[str]                      # per prompt, the generated text
    token_ids: list[list[int]]            # per prompt, the generated token ids
    request_ids: list[str]                # per prompt, the request id the trace's batches use
    stats: dict | None                    # the policy's statistics (SPEC §5), or None
    report: dict | None                   # shadow: stats plus hardware, simulated time, costs;
                                          # live offload: stats plus the mechanism's ("offload")
    trace: Trace                          # the routing of every step since the engine started
    outputs: list = field(default_factory=list, repr=False)   # vLLM's RequestOutput objects


def _import_vllm():
    try:
        import vllm
    except ImportError as e:
        from .launch import INSTALL_HINT
        raise VllmIntegrationError(f"vllm is not importable here ({e}); {INSTALL_HINT}") from None
    return vllm


def _env_defaults() -> None:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


class PolicyRunner:
    """A ``vllm.LLM`` with mpl's worker extension: every step's routing is recorded and,
    when ``policy`` is given, fed to the policy's runtime in shadow mode (its simulated
    statistics on ``hardware``) or, with ``offload=True``, live: every worker moves the
    experts to a host store and a slot pool sized by the policy, whose runtime decides what
    the engine holds (``stream_slots``: transient pool entries, default a few per routed
    expert on the CPU build without memory tiers, on a GPU and with memory tiers a quarter of
    the device cache, at least that and at most one per expert of a layer: ``Offload``'s
    ``transient_area``; fewer than the experts computes a large step over groups of tokens). ``lookahead``: record pre-gating predictions that many layers
    ahead (0: none; default: the policy's distance when it prefetches by ``lookahead`` or
    ``learned``, else none). Other keyword arguments go to ``vllm.LLM``;
    ``enforce_eager`` defaults to True (compiled mode cannot be recorded)."""

    def __init__(self, model: str, policy=None, *, policy_name: str | None = None,
                 hardware=None, offload: bool = False, stream_slots: int | None = None,
                 lookahead: int | None = None, **llm_kwargs) -> None:
        self.model = os.fspath(model)
        self.llm = None
        self._config = None        # the workers' config of the session that runs
        config = self._session_config(policy, policy_name, hardware, offload, stream_slots,
                                      lookahead)
        if llm_kwargs.get("enforce_eager") is False:
            raise VllmIntegrationError(
                "enforce_eager=False: vLLM traces the MoE routers into the compiled graph, so "
                "routing capture would record nothing; use enforce_eager=True")
        vllm = _import_vllm()
        _env_defaults()
        kw = dict(enforce_eager=True, worker_extension_cls=EXTENSION)
        kw.update(llm_kwargs)
        if kw["worker_extension_cls"] != EXTENSION:
            raise VllmIntegrationError("worker_extension_cls is mpl's own; do not pass another")
        self.llm = vllm.LLM(model=self.model, **kw)
        try:
            self._start(config)
        except VllmIntegrationError:
            self.close()
            raise

    def _session_config(self, policy, policy_name, hardware, offload, stream_slots,
                        lookahead=None) -> dict:
        """Check the arguments (before any engine starts) and return the workers' config."""
        offload = bool(offload)
        if lookahead is not None and (isinstance(lookahead, bool) or not isinstance(lookahead, int)
                                      or lookahead < 0):
            raise VllmIntegrationError(f"lookahead must be an integer >= 0 (0: no pre-gating), "
                                       f"got {lookahead!r}")
        if offload and policy is None:
            raise VllmIntegrationError("offload=True needs a policy: its runtime decides which "
                                       "experts the engine holds")
        if stream_slots is not None and (isinstance(stream_slots, bool)
                                         or not isinstance(stream_slots, int) or stream_slots < 1):
            raise VllmIntegrationError(f"stream_slots must be an integer >= 1, got {stream_slots!r}")
        if stream_slots is not None and not offload:
            raise VllmIntegrationError("stream_slots sizes the live offload pool: it needs offload=True")
        text = path = None
        if policy is not None:
            text, path, name = PREFLIGHT.policy_source(policy)
            policy_name = policy_name or name
            PREFLIGHT.check_policy(text, path, policy_name, PREFLIGHT.model_shape(self.model))
            if offload:
                PREFLIGHT.check_live(text, path, policy_name)
        if hardware is not None:
            from mpl.timemodel import hardware as hw
            try:
                hw.resolve(hardware)
            except hw.HardwareError as e:
                raise VllmIntegrationError(str(e)) from None
        return {"policy_text": text, "policy_name": policy_name, "policy_path": path,
                "hardware": hardware, "offload": offload, "stream_slots": stream_slots,
                "lookahead": lookahead,
                "model_name": os.path.basename(os.path.normpath(self.model)) or self.model}

    def _engine(self):
        """The engine; a clear error once the runner is closed."""
        if self.llm is None:
            raise VllmIntegrationError("this PolicyRunner is closed (close(), or a policy that "
                                       "failed to start and to be replaced): make a new one")
        return self.llm

    def _start(self, config: dict) -> None:
        """Start mpl's session in every worker; a worker that refuses it is left as it was
        (``Session``), the others are stopped again."""
        llm = self._engine()
        try:
            self.layout = llm.collective_rpc("mpl_start", args=(config,))
        except Exception as e:
            why = _remote_message(e)
            try:
                llm.collective_rpc("mpl_stop")
            except Exception:
                pass
            raise VllmIntegrationError(why) from None
        # what runs now, as the session's config says
        self._config = config
        self.offload, self.hardware = config["offload"], config["hardware"]
        self.policy_text, self.policy_path, self.policy_name = (
            config["policy_text"], config["policy_path"], config["policy_name"])

    def switch(self, policy=None, *, policy_name: str | None = None, hardware=None,
               offload: bool = False, stream_slots: int | None = None,
               lookahead: int | None = None) -> None:
        """Replace the policy (or the live/shadow mode) without restarting the engine: every
        worker puts its experts back on its layers and starts afresh (a new trace, a new
        runtime; with ``offload`` a new store and pool sized by the new policy)."""
        before = self._config
        llm = self._engine()
        config = self._session_config(policy, policy_name, hardware, offload, stream_slots,
                                      lookahead)
        try:
            llm.collective_rpc("mpl_stop")
        except Exception as e:
            raise VllmIntegrationError(_remote_message(e)) from None
        try:
            self._start(config)
        except VllmIntegrationError as e:
            # refused where only a worker can tell (the model's own tensors): the policy
            # that ran before runs again, and the engine stays up
            try:
                self._start(before)
            except VllmIntegrationError as again:
                self.close()
                raise VllmIntegrationError(f"{e}; the previous policy did not start again "
                                           f"either ({again}): the engine is closed") from None
            raise VllmIntegrationError(f"{e} (the policy that ran before runs again)") from None

    def generate(self, prompts, max_tokens: int = 16, sampling_params=None, **sampling) -> Result:
        """Generate for ``prompts`` (strings, or lists of token ids), greedy unless
        ``sampling_params`` / ``sampling`` say otherwise; returns texts, policy stats and the
        trace of every step so far."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if isinstance(prompts, (str, dict)) or (isinstance(prompts, list) and prompts
                                                and isinstance(prompts[0], int)):
            prompts = [prompts]
        ins = [TokensPrompt(prompt_token_ids=list(p)) if isinstance(p, (list, tuple)) else p
               for p in prompts]
        if sampling_params is None:
            sampling_params = SamplingParams(**{"max_tokens": max_tokens, "temperature": 0.0,
                                                **sampling})
        outs = self._engine().generate(ins, sampling_params, use_tqdm=False)
        trace, report = self.collect()
        return Result(texts=[o.outputs[0].text for o in outs],
                      token_ids=[list(o.outputs[0].token_ids) for o in outs],
                      request_ids=trace_request_ids(trace, [o.request_id for o in outs]),
                      stats=report["stats"] if report else None, report=report,
                      trace=trace, outputs=outs)

    def collect(self) -> tuple[Trace, dict | None]:
        """The trace of every step so far (from the recording rank) and the shadow report.
        Raises when a rank's routing differs from the recording rank's, or when capture saw
        no routing in a step that ran."""
        from mpl import traceio

        try:
            parts = self._engine().collective_rpc("mpl_collect")
        except Exception as e:
            raise VllmIntegrationError(_remote_message(e)) from None
        for p in parts:
            if p["problem"]:
                raise VllmIntegrationError(p["problem"])
        main = next((p for p in parts if p["trace"] is not None), None)
        if main is None:
            raise VllmIntegrationError("no worker recorded a trace")
        other = [p for p in parts if p["digest"] != main["digest"] and p["steps"] == main["steps"]]
        if other:
            raise VllmIntegrationError(
                f"tensor-parallel rank {other[0]['rank']} saw different routing than rank "
                f"{main['rank']}: the trace of one rank would not describe the others")
        trace = traceio.from_bytes(main["trace"], "<vllm worker>")
        if not trace.dispatches and main["steps"]:
            raise VllmIntegrationError("the engine ran steps but no routing was recorded")
        if self.offload:
            lives = [p["live"] for p in parts]
            digests = {lv["offload"]["decision_digest"] for lv in lives}
            if len(digests) > 1:
                raise VllmIntegrationError(
                    "tensor-parallel ranks made different offload decisions for the same routing: "
                    + ", ".join(f"rank {lv['rank']}: {lv['offload']['decision_digest']:#010x}"
                                for lv in lives))
            rep = next(lv for lv in lives if lv["rank"] == main["rank"])
            rep = dict(rep, ranks=len(lives))
            return trace, rep
        return trace, main["shadow"]

    def save_trace(self, path: str) -> Trace:
        from mpl import traceio

        trace, _ = self.collect()
        if not trace.dispatches:
            raise VllmIntegrationError("nothing recorded yet: generate first")
        traceio.save(trace, path)
        return trace

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        self.llm = None
        try:
            llm.llm_engine.engine_core.shutdown()
        except Exception:
            pass

    def __enter__(self) -> "PolicyRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def trace_request_ids(trace: Trace, ids: list[str]) -> list[str]:
    """The engine's internal ids (the request id plus a suffix vLLM adds: ``0-1a2b3c4d``)
    that the trace's batches name, for the request ids the outputs carry."""
    seen = {r for b in trace.header.extra.get("batches", []) for r, _ in b}
    out = []
    for rid in ids:
        match = [r for r in seen if r == rid or r.startswith(rid + "-")]
        out.append(match[0] if len(match) == 1 else rid)
    return out


#: how vLLM's multiprocess executor wraps a worker's exception in a collective_rpc
_WORKER_FAILED = ("Worker failed with error '", "', please check the stack trace")


def _remote_message(e: BaseException) -> str:
    """The worker's own message out of vLLM's RPC wrapper."""
    msg = str(e)
    marker = "VllmIntegrationError: "
    head, tail = _WORKER_FAILED
    if marker in msg:
        msg = msg.split(marker, 1)[1].strip().splitlines()[0]
    elif head in msg and tail in msg.split(head, 1)[1]:
        msg = msg.split(head, 1)[1].split(tail, 1)[0]
    return msg
