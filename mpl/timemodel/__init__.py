"""The simulated-time model: hardware profiles and the per-operation costs they give
(:mod:`mpl.timemodel.hardware`), and the timeline that plays a runtime's Plans on them
(:mod:`mpl.timemodel.timeline`, formulas in ``docs/simulation.md``).

It is neutral ground: the replayer (``mpl.sim``), the shadow beside a live engine
(``mpl.mechanism.shadow``, for the HuggingFace and vLLM adapters) and the CLI all time Plans
here, so a shadow's numbers equal a replay of the trace it recorded. It imports only ``mpl.runtime`` (Plan, CostModel) and
``mpl.shapes``; no torch.
"""
