"""One recording (and optional shadow policy, or a live policy offloading the experts)
installed on a vLLM model runner: the part that runs inside the worker, shared by the Python API's worker extension and the
``vllm serve`` plugin. Imports vllm."""

from __future__ import annotations

import threading

from mpl.trace import Trace

from .capture import Capture, check_eager
from .errors import VllmIntegrationError

#: the attribute of the model runner that holds the installed session
ATTR = "_mpl_session"


def _rank() -> int:
    try:
        from vllm.distributed import get_tensor_model_parallel_rank
        return int(get_tensor_model_parallel_rank())
    except Exception:      # not initialised (single process): rank 0
        return 0


def _config_dict(hf_config) -> dict:
    d = hf_config.to_dict() if hasattr(hf_config, "to_dict") else dict(vars(hf_config))
    return {k: v for k, v in d.items() if isinstance(v, (int, float, str, list, dict, bool)) or v is None}


def _expert_bytes(model) -> tuple[int, int]:
    """Bytes of one expert's weights as the engine holds them (w13 + w2 of a FusedMoE), and
    the bits of one weight (0 when no expert was found)."""
    from vllm.model_executor.layers.fused_moe.layer import MoERunner

    for m in model.modules():
        if isinstance(m, MoERunner):
            owner = getattr(m, "routed_experts", None) or m
            total = bits = 0
            for name, p in owner.named_parameters(recurse=True):
                if name.split(".")[-1] in ("w13_weight", "w2_weight") and p.dim() == 3:
                    total += p[0].numel() * p.element_size()
                    bits = p.element_size() * 8
            if total:
                return int(total), bits
    return 0, 0


class Session:
    """``config``: policy_text / policy_path / policy_name (a shadow policy, optional),
    hardware, model_name, record (default True); offload (the policy runs live: the experts
    move to a host store and a slot pool its runtime drives) and stream_slots (transient pool
    entries, default a few per routed expert on the CPU build without memory tiers, on a GPU
    and with memory tiers a quarter of the device cache, at least that and at most one per
    expert of a layer). ``orig``: the runner's execute_model to
    wrap (default: the bound method the runner has now)."""

    def __init__(self, runner, config: dict, orig=None) -> None:
        vcfg = runner.vllm_config
        check_eager(vcfg)
        self.runner = runner
        self.rank = _rank()
        self.model_name = str(config.get("model_name") or vcfg.model_config.model)
        model = runner.get_model() if hasattr(runner, "get_model") else runner.model
        self.shadow = None
        keep = self.rank == 0 and bool(config.get("record", True))
        self.capture = Capture(model, vcfg.model_config.hf_config, keep=keep)
        self.offload = None
        try:
            self._begin(runner, config, orig)
        except BaseException:
            # a refused policy leaves the worker as it found it: the next start binds afresh
            if self.offload is not None:
                self.offload.close()
            self.capture.unbind()
            raise

    def _begin(self, runner, config: dict, orig) -> None:
        """The rest of ``__init__``, once the capture is bound: the policy (shadow or live),
        pre-gating, and the wrapped ``execute_model``."""
        import vllm

        vcfg = runner.vllm_config
        model = runner.get_model() if hasattr(runner, "get_model") else runner.model
        self.expert_bytes, self.stored_bits = _expert_bytes(model)
        self.source = f"recorded by mpl.vllm in vLLM {vllm.__version__}"
        self.extra = {"engine": "vllm", "engine_version": vllm.__version__,
                      "tensor_parallel_size": vcfg.parallel_config.tensor_parallel_size,
                      "data_parallel_rank": getattr(vcfg.parallel_config, "data_parallel_rank", 0),
                      "dtype": str(vcfg.model_config.dtype).replace("torch.", "")}
        self.live_policy = None
        distance = config.get("lookahead")     # pre-gating: asked for, or the policy's
        if config.get("offload") and not config.get("policy_text"):
            raise VllmIntegrationError("live offload needs a policy: its runtime decides which "
                                       "experts the engine holds")
        if config.get("policy_text") and (self.rank == 0 or config.get("offload")):
            from mpl import shapes
            from mpl.api import loads
            from mpl.mechanism.shadow import Shadow, policy_runtime

            from .errors import PREFLIGHT

            try:
                shape = shapes.from_config_dict(_config_dict(vcfg.model_config.hf_config))
            except shapes.ShapeError:
                shape = None      # the capture itself says what is missing
            PREFLIGHT.check_policy(config["policy_text"], config.get("policy_path"),
                                   config.get("policy_name"), shape)
            policy = loads(config["policy_text"], config.get("policy_name"),
                           path=config.get("policy_path"))
            from mpl.features import features

            feats = features(policy.ir)
            if distance is None and (feats.lookahead_strategy or feats.learned):
                distance = feats.affinity_depth          # (learned reads the picks too)
            if config.get("offload"):
                # every rank: its own runtime, fed the same routing, decides for its shard
                from .offload import Offload

                from mpl.mechanism.preflight import not_live_yet
                why = not_live_yet(policy.ir, engine="vllm")
                if why:
                    raise VllmIntegrationError(why)
                self.live_profile, _, rt = policy_runtime(policy, self.header(),
                                                          hardware=config.get("hardware"))
                modes = feats.modes
                self.offload = Offload(self.capture.runners, rt,
                                       stream_slots=config.get("stream_slots"),
                                       cpu_capable="cpu_fallback" in modes or "hybrid" in modes,
                                       ir=policy.ir)
                self.live_policy = policy
                self.capture.on_dispatch = self.offload.executor.plan
            else:
                self.shadow = Shadow(policy, self.header(), hardware=config.get("hardware"))
                self.capture.on_dispatch = self.shadow.feed
        if distance:
            self.capture.pregate(int(distance))
        self.lock = threading.Lock()        # held for a whole step; snapshots take it
        self._orig = orig if orig is not None else runner.execute_model
        runner.execute_model = self._execute_model
        setattr(runner, ATTR, self)

    def _execute_model(self, scheduler_output, *a, **kw):
        cap = self.capture
        with self.lock:
            active = cap.begin_step(scheduler_output)
            try:
                return self._orig(scheduler_output, *a, **kw)
            finally:
                if active:
                    cap.end_step(scheduler_output,
                                 list(getattr(self.runner.input_batch, "req_ids", []) or []))

    def header(self):
        return self.capture.header(self.model_name, self.expert_bytes, self.source, self.extra,
                                   self.stored_bits)

    def trace(self) -> Trace:
        cap = self.capture
        if cap.problem:
            raise VllmIntegrationError(cap.problem)
        h = self.header()
        h.extra["batches"] = list(h.extra["batches"])
        return Trace(h, list(cap.dispatches))

    def live_report(self) -> dict:
        """The live policy's report: its runtime's statistics (what the mechanism did, stalls
        measured) and the mechanism's own under ``offload``."""
        from mpl.runtime.arrival import arrived

        ex = self.offload.executor
        return {"policy": self.live_policy.name, "mode": "offload",
                "hardware": self.live_profile.to_dict(), "rank": self.rank,
                "dispatches": ex.dispatches,
                "stats": arrived(ex.runtime.stats(), ex.pool.late, ex.pool.late_layers),
                "offload": self.offload.stats()}

    def policy_report(self) -> dict | None:
        if self.offload is not None:
            return self.live_report()
        return self.shadow.report() if self.shadow else None

    def snapshot(self) -> tuple[int, Trace | None, dict | None]:
        """(steps so far, the trace, the policy's report), consistent: taken between steps."""
        with self.lock:
            trace = self.trace() if self.capture.keep else None
            rep = self.policy_report() if self.rank == 0 else None
            return self.capture.step + 1, trace, rep

    def collect(self) -> dict:
        """What this rank has: the trace (recording rank; native bytes), the shadow report,
        the routing digest (every rank) and the problem, if any."""
        from mpl import traceio

        cap = self.capture
        out = {"rank": self.rank, "digest": cap.digest, "steps": cap.step + 1,
               "problem": cap.problem, "trace": None, "shadow": None}
        if cap.keep and cap.problem is None:
            out["trace"] = traceio.to_bytes(self.trace(), weights="f32")
        if self.shadow is not None:
            out["shadow"] = self.shadow.report()
        if self.offload is not None:
            out["live"] = self.live_report()
        return out

    def close(self) -> None:
        if self.offload is not None:
            self.offload.close()
            self.offload = None
        self.capture.unbind()
        self.runner.execute_model = self._orig
        if getattr(self.runner, ATTR, None) is self:
            delattr(self.runner, ATTR)


def install(runner, config: dict, orig=None) -> Session:
    if getattr(runner, ATTR, None) is not None:
        raise VllmIntegrationError("mpl is already recording on this engine")
    return Session(runner, config, orig)


class MplWorkerExtension:
    """``LLM(..., worker_extension_cls="mpl.vllm.session.MplWorkerExtension")``: the methods
    ``llm.collective_rpc`` calls in every worker."""

    def mpl_start(self, config: dict) -> dict:
        s = install(self.model_runner, config)
        return {"rank": s.rank, "moe_layers": list(s.capture.layer_ids),
                "num_experts": s.capture.num_experts, "top_k": s.capture.top_k}

    def mpl_collect(self) -> dict:
        s = getattr(self.model_runner, ATTR, None)
        if s is None:
            raise VllmIntegrationError("mpl is not recording on this engine (mpl_start first)")
        return s.collect()

    def mpl_stop(self) -> None:
        s = getattr(self.model_runner, ATTR, None)
        if s is not None:
            s.close()
