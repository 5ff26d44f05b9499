"""The engine-neutral live mechanism, shared by the HuggingFace adapter (``mpl.offload``) and
the vLLM integration (``mpl.vllm``):

* ``device``: the device operations behind one interface (``CudaOps``: streams, events,
  ``non_blocking`` copies, a page-locked arena; ``SyncOps``: a device without queues);
* ``store``: the host store (every offloaded expert in one host arena);
* ``pool``: the fixed device slot pool, its copy streams and ready/free events;
* ``staging``: pre-allocated buffers for the small per-dispatch uploads;
* ``execute``: carrying out a Plan on the pool, the steps every engine shares (its
  transfers in order, its placements checked, the passes of a dispatch that streams more
  experts than the transient entries hold);
* ``live``: ``LiveExecutor``, a policy's Plans executed before each MoE layer's kernel for
  an engine whose kernel runs over a tensor of experts with remapped ids (vLLM's);
* ``shadow``: a policy beside an unchanged engine, its Plans timed on a hardware profile
  (statistics equal to a replay of the recorded trace);
* ``preflight``: the policy checked against the model's shape before anything starts or
  changes (located diagnostics; ``PolicyDoesNotFit``);
* ``footprint``: the host and device memory an attach takes, in allocation order, checked
  against what the process can get before anything is allocated.

It knows nothing of any engine: an adapter hands it ``[E, ...]`` expert tensors, a kernel,
the dispatches its routing capture sees. ``device``, ``store``, ``pool``, ``staging``,
``execute`` and ``live`` import torch; ``shadow``, ``preflight`` and ``footprint`` do not (``footprint`` asks torch only for a CUDA device's free memory) (they run in the
command-line process before an engine starts). It imports the neutral parts of mpl (the
runtime's Plan, the trace records, the time model, the checker), never the API, the CLI or
an adapter (``tests/test_import_graph.py``).
"""
