"""The engine-independent half of the live mechanism (torch), shared by the HuggingFace
adapter (``mpl.offload``) and the vLLM integration (``mpl.vllm``):

* ``device``: the device operations behind one interface (``CudaOps``: streams, events,
  ``non_blocking`` copies, a page-locked arena; ``SyncOps``: a device without queues);
* ``store``: the host store (every offloaded expert in one host arena);
* ``pool``: the fixed device slot pool, its copy streams and ready/free events;
* ``staging``: pre-allocated buffers for the small per-dispatch uploads.

It knows nothing of any engine: an engine adapter hands it ``[E, ...]`` expert tensors and
executes the runtime's Plans with it. Imports torch; nothing else of mpl but this package.
"""
