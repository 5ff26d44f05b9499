"""Live expert offloading in a vLLM worker: every MoE layer's expert weights move to a host
store, the layers share one fixed device slot pool sized by the policy, and each layer's
expert computation runs the Plan of its dispatch (``mpl.mechanism.live.LiveExecutor``) before
vLLM's own kernel runs on the pool with the ids remapped to pool entries. Imports vllm.

What is supported (checked at install, before anything changes; anything else is refused
with a message naming it): the unquantized MoE method (``UnquantizedFusedMoEMethod``) with
the CPU build's kernel (its prepacked layout is copied as is: each expert's rows are
independent) or the Triton kernel on CUDA; no expert parallelism, no EPLB, no expert biases,
no monolithic kernels; eager mode.

A policy with memory tiers (``mpl.mechanism.preflight.not_live_yet`` says which run) runs on
the same executor and the tier mechanism HuggingFace attach runs (``mpl.mechanism.tiered``):
the device cache over host memory, or over a host tier with a capacity and a disk tier whose
files are written here, from the engine's own expert rows (``mpl.mechanism.tiered.TierBuild``),
before the layers change; a low-precision gpu tier (int8, int4, the int8/int4 ladder) right
under it over host memory, its experts quantised from the engine's rows and dequantised into
a transient pool entry for the kernel (on the CPU build the rows are the kernel's prepacked
layout, quantised as they are: a row of the packed matrix shares a scale); a second
full-precision gpu tier; ``granularity_split`` (the device cache holds parts, put together in
a transient entry); CPU-placed experts of a layer on disk computed from the host tier's
records. The layers on disk keep no host copy; ``close`` reads them back from the files and
removes the files.
"""

from __future__ import annotations

import torch

from mpl.mechanism.live import ALONE, IN_PLACE, LiveExecutor, LiveError, row_probe, silu_experts

from .errors import VllmIntegrationError

#: the unquantized backends whose kernel reads w13/w2 as ``[E, ...]`` expert rows that can be
#: copied one expert at a time (CPU: its prepacked grouped-gemm layout; Triton: plain)
SUPPORTED_BACKENDS = ("CPU", "TRITON")
WEIGHTS = ("w13_weight", "w2_weight")


def expert_storage_bytes(runners) -> int:
    """Bytes of the distinct storages behind the MoE layers' expert weights (what the
    engine's layers hold, measured on the tensors)."""
    seen: dict[int, int] = {}
    for r in runners:
        for name in WEIGHTS:
            t = getattr(r.routed_experts, name, None)
            if isinstance(t, torch.Tensor):
                st = t.untyped_storage()
                seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def check_supported(runners) -> None:
    """Refuse, naming it, what live offload cannot run (before anything changes)."""
    from vllm.model_executor.layers.fused_moe.unquantized_fused_moe_method import (
        UnquantizedFusedMoEMethod,
    )

    for r in runners:
        re_ = getattr(r, "routed_experts", None)
        where = f"MoE layer {r.layer_id}"
        if re_ is None:
            raise VllmIntegrationError(f"{where} has no routed_experts module: this vLLM's MoE "
                                       "layout is not supported by live offload")
        qm = re_.quant_method
        if type(qm) is not UnquantizedFusedMoEMethod:
            raise VllmIntegrationError(
                f"{where} uses the quantization method {type(qm).__name__}: live offload "
                "supports unquantized MoE weights only (UnquantizedFusedMoEMethod)")
        backend = getattr(getattr(qm, "unquantized_backend", None), "name", "?")
        if backend not in SUPPORTED_BACKENDS:
            raise VllmIntegrationError(
                f"{where} runs the {backend} MoE kernel: live offload supports the "
                f"{' and '.join(SUPPORTED_BACKENDS)} kernels (their expert rows can be copied one "
                "expert at a time)")
        if getattr(qm, "is_monolithic", False):
            raise VllmIntegrationError(f"{where}: a monolithic MoE kernel routes inside the "
                                       "kernel; live offload needs the router's ids first")
        if qm.moe_kernel is None:
            raise VllmIntegrationError(f"{where}: the MoE kernel is not built yet (load the "
                                       "weights first)")
        if getattr(getattr(qm.moe_kernel, "fused_experts", None), "_use_zentorch", False):
            raise VllmIntegrationError(f"{where} runs the zentorch MoE kernel, which live "
                                       "offload does not support")
        if re_.use_ep or re_.expert_map is not None:
            raise VllmIntegrationError(f"{where}: expert parallelism is on; live offload "
                                       "does not combine with it (drop --enable-expert-parallel)")
        mpc = re_.moe_config.moe_parallel_config
        if int(getattr(mpc, "dp_size", 1) or 1) > 1 or int(getattr(mpc, "pcp_size", 1) or 1) > 1:
            raise VllmIntegrationError(
                f"{where}: data (or context) parallelism: vLLM gathers every rank's tokens and "
                "routing inside the MoE kernel, so one rank's ids would index another rank's "
                "pool; live offload runs with tensor parallelism only")
        if getattr(mpc, "enable_eplb", False):
            raise VllmIntegrationError(f"{where}: EPLB rearranges the experts itself; turn it "
                                       "off to offload")
        if getattr(re_, "w13_bias", None) is not None or getattr(re_, "w2_bias", None) is not None:
            raise VllmIntegrationError(
                f"{where} has expert biases (w13_bias/w2_bias), which the kernel reads from its "
                "quant config rather than its arguments: live offload does not support them")
        for name in WEIGHTS:
            t = getattr(re_, name, None)
            if not isinstance(t, torch.Tensor) or t.dim() < 2:
                raise VllmIntegrationError(f"{where} has no {name} [experts, ...] tensor")
            if t.shape[0] != re_.local_num_experts:
                raise VllmIntegrationError(f"{where}: {name} holds {t.shape[0]} experts, the "
                                           f"layer {re_.local_num_experts}")


def _kernel_of(runners):
    """kernel(ordinal, x, tensors, weights, ids, first, shared): vLLM's own modular kernel
    of that layer on ``tensors`` (what ``forward_native`` does with the layer's weights)."""
    kernels = [r.routed_experts.quant_method.moe_kernel for r in runners]
    experts = [r.routed_experts for r in runners]

    def kernel(ordinal, x, tensors, weights, ids, first, shared):
        re_ = experts[ordinal]
        se, se_in = shared if (first and shared is not None) else (None, None)
        out = kernels[ordinal].apply(
            hidden_states=x, w1=tensors["w13_weight"], w2=tensors["w2_weight"],
            topk_weights=weights, topk_ids=ids, activation=re_.activation,
            global_num_experts=-1, expert_map=None,
            apply_router_weight_on_input=re_.apply_router_weight_on_input,
            shared_experts=se, shared_experts_input=se_in)
        if not isinstance(out, torch.Tensor):
            raise LiveError(f"MoE layer {ordinal}: the kernel returned {type(out).__name__}, "
                            "not a finished output (a deferred finalize is not supported)")
        return out
    return kernel


def _cpu_kernel_of(runners, device, kernel):
    """The kernel computing CPU-placed experts from the host store: on the CPU build vLLM's
    own CPU kernel (the store holds its layout); on a GPU build plain torch over the
    Triton layout (SiLU-and-mul experts only)."""
    if device.type == "cpu":
        return kernel
    act = str(getattr(runners[0].routed_experts.activation, "value", "")).lower()
    if act != "silu":
        return None

    def cpu_kernel(ordinal, x, tensors, weights, ids, first, shared):
        return silu_experts(x, tensors, weights, ids)
    return cpu_kernel


def transient_area(num_experts: int, top_k: int, cache_entries: int, stream_slots: int | None,
                   *, gpu: bool, tiered: bool, probe) -> tuple[int, str | None]:
    """The transient entries of vLLM's live offload and how a step beyond them is computed:
    ``(stream_slots, row_passes)``. ``cache_entries``: the device cache in whole experts;
    ``stream_slots``: the caller's (None: the default); ``probe(mode)``: whether the kernel
    keeps its bits over groups of tokens in ``mode`` (:func:`mpl.mechanism.live.row_probe`).

    The default: on the CPU build without memory tiers, the bound HuggingFace attach uses,
    a step beyond it computed from the host store in one call (LiveExecutor's host window);
    on a GPU and with memory tiers, a share of the device cache
    (:func:`mpl.mechanism.footprint.live_stream_slots`). vLLM's kernels add each token's
    top-k outputs inside (a pass over some experts would round a partial sum), so a step
    beyond the entries runs in calls over groups of tokens, each with all its tokens'
    experts in place: the CPU kernel computes a token the same whatever other tokens it is
    given (:data:`ALONE`: called on the group's tokens); the GPU kernels choose their
    tiling by the number of tokens (:data:`IN_PLACE`: called on every token, the others'
    experts the zero entry). Where the probe finds a difference, passes over experts when
    the caller named the entries, else (a default beyond the host window) one entry per
    expert: the default keeps the engine's bits."""
    from mpl.mechanism import footprint

    window = not gpu and not tiered
    if stream_slots is not None:
        stream = int(stream_slots)
    elif window:
        stream = footprint.default_stream_slots(num_experts, top_k)
    else:
        stream = footprint.live_stream_slots(num_experts, top_k, cache_entries)
    if stream < 1:
        raise VllmIntegrationError(
            f"{stream} transient slots: live offload needs at least 1 (a step whose "
            "distinct experts exceed the cache streams them through the transient slots, "
            "in passes when they are more than the slots)")
    by_rows = None
    if stream < num_experts:
        mode = IN_PLACE if gpu else ALONE
        if probe(mode):
            by_rows = mode
        elif stream_slots is None and not window:
            stream = num_experts
    return stream, by_rows


class Offload:
    """Installed on the MoE layers of a worker's model (``runners``: the capture's MoE
    layers, in ordinal order). ``runtime``: the policy's live runtime; ``ir``: the policy's
    IR (memory tiers: refusals located at its tiers); ``readers``: a disk tier's reader
    threads."""

    def __init__(self, runners, runtime, *, stream_slots: int | None = None, cpu_capable: bool,
                 ops=None, ir=None, readers: int = 4) -> None:
        check_supported(runners)
        from mpl.mechanism.device import ops_for

        first = runners[0].routed_experts
        device = first.w13_weight.device
        E = int(first.local_num_experts)
        sig = tuple((n, tuple(getattr(first, n).shape), getattr(first, n).dtype) for n in WEIGHTS)
        for r in runners[1:]:
            re_ = r.routed_experts
            if tuple((n, tuple(getattr(re_, n).shape), getattr(re_, n).dtype) for n in WEIGHTS) != sig:
                raise VllmIntegrationError(
                    f"MoE layer {r.layer_id} differs in expert shape from layer "
                    f"{runners[0].layer_id}: live offload needs one expert shape")
        self.runners = list(runners)
        self.before_bytes = expert_storage_bytes(runners)
        kernel = _kernel_of(runners)
        cpu_kernel = _cpu_kernel_of(runners, device, kernel) if cpu_capable else None
        if cpu_capable and cpu_kernel is None:
            raise VllmIntegrationError(
                "the policy can place experts on the CPU (schedule.mode = cpu_fallback or "
                "hybrid), and this model's experts do not use SiLU: no CPU expert kernel")
        tiers = getattr(runtime, "tier_layout", None)
        top_k = int(runners[0].router.top_k)
        from mpl.mechanism import footprint
        from mpl.mechanism.tiered import part_split

        def probe(mode):
            return row_probe(kernel, {n: getattr(first, n).data for n in WEIGHTS},
                             int(first.w2_weight.shape[1]), top_k, mode)
        stream, by_rows = transient_area(E, top_k, runtime.num_slots // part_split(tiers),
                                         stream_slots, gpu=device.type != "cpu",
                                         tiered=tiers is not None, probe=probe)
        layers = [{n: getattr(r.routed_experts, n).data for n in WEIGHTS} for r in runners]
        if tiers is not None and ir is not None:
            from mpl.mechanism.tiered import tier_dtype_misfit
            why = tier_dtype_misfit(ir, first.w13_weight.dtype)
            if why:
                raise VllmIntegrationError(why)
        why = footprint.refusal(footprint.live_executor(layers, runtime.num_slots, stream, device,
                                                        tier_layout=tiers),
                                "live offload of this model", host=footprint.host_available(),
                                device=footprint.device_free(device), device_name=str(device))
        if why:
            raise VllmIntegrationError(why)
        self.tier_build = None
        if tiers is not None:    # the disk tiers' files, written before the layers change
            from mpl.mechanism.disk import DiskError
            from mpl.mechanism.tiered import TierBuild
            try:
                self.tier_build = TierBuild(runtime, layers, [r.layer_id for r in runners], ir=ir)
            except DiskError as e:
                raise VllmIntegrationError(str(e)) from None
        try:
            self.executor = LiveExecutor(runtime, layers, device, kernel=kernel,
                                         cpu_kernel=cpu_kernel, stream_slots=stream,
                                         ops=ops or ops_for(device), tiers=self.tier_build,
                                         readers=readers, row_passes=by_rows)
        except BaseException as e:
            if self.tier_build is not None:
                self.tier_build.remove()
            if isinstance(e, (torch.cuda.OutOfMemoryError, MemoryError)):
                raise VllmIntegrationError(
                    f"the slot pool ({runtime.num_slots} cache slots + {stream} transient) or "
                    f"the host tier's cache does not fit on {device}: lower the policy's "
                    f"capacities ({e})") from None
            raise
        del layers
        # the layers now hold the pool (one storage for all of them), nothing else
        self._saved = []
        pool = self.executor.pool
        for i, r in enumerate(runners):
            re_ = r.routed_experts
            self._saved.append({n: getattr(re_, n) for n in WEIGHTS})
            for n in WEIGHTS:
                setattr(re_, n, torch.nn.Parameter(pool.tensors[n], requires_grad=False))
            re_.forward_modular = self._forward_of(i)
        self.after_bytes = expert_storage_bytes(runners)
        # the original weights now live in the host store only
        for saved in self._saved:
            for p in saved.values():
                p.data = torch.empty(0, dtype=p.dtype, device=p.device)

    def _forward_of(self, ordinal: int):
        ex = self.executor

        def forward_modular(x, topk_weights, topk_ids, shared_experts=None,
                            shared_experts_input=None):
            shared = (shared_experts, shared_experts_input) if shared_experts is not None else None
            return ex.forward(ordinal, x, topk_weights, topk_ids, shared)
        return forward_modular

    def stats(self) -> dict:
        self.executor.flush_stalls()
        s = self.executor.stats()
        s["layer_bytes_before"] = self.before_bytes
        s["layer_bytes_after"] = self.after_bytes
        return s

    def close(self) -> None:
        """Put the weights back on the layers (from the host store, or read back from a disk
        tier's files) and their own forward; a disk tier's files are removed."""
        hosts = self.executor.hosts
        build = self.tier_build
        self.executor.flush_stalls()
        try:
            for o, (r, saved, host) in enumerate(zip(self.runners, self._saved, hosts)):
                re_ = r.routed_experts
                re_.__dict__.pop("forward_modular", None)
                data = host if host else build.read_layer(o, saved)
                for n, p in saved.items():
                    p.data = data[n].to(p.device).clone() if host else data[n].to(p.device)
                    setattr(re_, n, p)
            self.executor.release()
        finally:
            if build is not None:
                build.remove()
