"""Whether an engine runs vLLM's async scheduler, from its flags and its speculative config.

``--async-scheduling`` / ``--no-async-scheduling`` (``SchedulerConfig.async_scheduling: bool | None``, default
``None``; argparse BooleanOptionalAction in vllm/engine/arg_utils.py) decide when written. Unset, ``VllmConfig.
__post_init__`` (vllm/config/vllm.py: 0.14.0 lines 588-628, 0.18.0 lines 718-752, 0.22.0 lines 935-975, 0.23.0
lines 957-997) turns it on unless the model is a pooling model, the speculative method is neither an EAGLE-type one
(``EagleModelTypes``: eagle, eagle3, the MTP types, dflash, extract_hidden_states) nor ``ngram_gpu``, the
speculative config sets ``disable_padded_drafter_batch``, or the distributed executor backend does not support it
(``ray`` in 0.18.0: "only `mp`, `uni`, and `external_launcher`").
"""

from __future__ import annotations

from pdd_operator.vllm.versions import Version

#: The first release whose scheduler defers a KV consumer's block frees until the in-flight step is processed
#: (``Scheduler.defer_block_free`` / ``deferred_frees`` in v1/core/sched/scheduler.py: absent from the 0.18.0-0.23.0
#: sdists, present in 0.24.0, 0.25.0, 0.25.1 and 0.26.0; vllm-project/vllm#45357). Before it a hybrid SSM decode that
#: schedules asynchronously can have a freed conv/SSM state block overwritten after NIXL wrote a new request's state
#: into it (vllm-project/vllm#37285, #42182).
CONSUMER_DEFERRED_FREE_SINCE: Version = (0, 24, 0)
#: The first release that serves hybrid SSM models over NIXL (the ``hybrid-ssm-unsupported`` rule's bound).
HYBRID_NIXL_SINCE: Version = (0, 18, 0)

#: Speculative methods that turn the default off (vllm/config/speculative.py ``SpeculativeMethod`` less
#: ``EagleModelTypes`` and ``NgramGPUTypes``, 0.18.0-0.23.0).
ASYNC_OFF_SPEC_METHODS = ("ngram", "medusa", "mlp_speculator", "draft_model", "suffix")


def async_scheduling(explicit: bool | None, speculative: dict | None, executor_backend: str | None = None) -> bool:
    """Whether the engine schedules asynchronously: ``explicit`` (the written flag) when not ``None``, else vLLM's
    default for a generative model (see the module docstring) given its ``--speculative-config`` dict and its
    ``--distributed-executor-backend``."""
    if explicit is not None:
        return explicit
    spec = speculative or {}
    if spec.get("method") in ASYNC_OFF_SPEC_METHODS or spec.get("disable_padded_drafter_batch") is True:
        return False
    return executor_backend != "ray"


def hybrid_decode_needs_sync(version: Version | None) -> bool:
    """Whether a hybrid SSM decode on ``version`` should schedule synchronously (``--no-async-scheduling``): the
    releases that serve hybrid models over NIXL before :data:`CONSUMER_DEFERRED_FREE_SINCE`, and an unknown one."""
    return version is None or HYBRID_NIXL_SINCE <= version < CONSUMER_DEFERRED_FREE_SINCE
