"""What every rule sees: the spec, the vLLM version it will run, and the model's traits."""

from __future__ import annotations

from dataclasses import dataclass

from pdd_operator.api.spec import Architecture, Connector, ConvStateLayout, PDDeploymentSpec, RoleSpec
from pdd_operator.compat.architectures import ModelTraits, traits
from pdd_operator.compat.versions import Version, resolve_version


@dataclass(frozen=True)
class Context:
    """Inputs of the rules, derived once per evaluation.

    Attributes:
        spec: the PDDeployment spec.
        version: the vLLM version ``(major, minor, patch)``, or ``None`` when it cannot be determined.
        version_source: where ``version`` came from (``spec.engine.vllmVersion``, ``image tag``, ``unknown``).
        model: the model's family and SSM kind.
    """

    spec: PDDeploymentSpec
    version: Version | None
    version_source: str
    model: ModelTraits

    @classmethod
    def of(cls, spec: PDDeploymentSpec) -> Context:
        """Build the context of ``spec``: resolve its vLLM version and model traits."""
        version, source = resolve_version(spec.engine.vllm_version, spec.engine.image)
        model = traits(spec.model.architecture, spec.model.ssm_kind, spec.model.hf_architecture, spec.model.name)
        return cls(spec=spec, version=version, version_source=source, model=model)

    # --- convenience views used by many rules -------------------------------------------------

    @property
    def prefill(self) -> RoleSpec:
        return self.spec.prefill

    @property
    def decode(self) -> RoleSpec:
        return self.spec.decode

    @property
    def push(self) -> bool:
        """True for the push connector (``NixlPushConnector``)."""
        return self.spec.kv_transfer.connector == Connector.PUSH

    @property
    def hybrid_ssm(self) -> bool:
        return self.model.architecture == Architecture.HYBRID_SSM

    @property
    def mla(self) -> bool:
        return self.model.architecture in (Architecture.MLA, Architecture.SPARSE_MLA)

    @property
    def hetero_tp(self) -> bool:
        return self.prefill.tensor_parallel_size != self.decode.tensor_parallel_size

    def at_least(self, version: Version) -> bool:
        """True when the deployment's vLLM is ``version`` or newer. Callers check ``self.version``."""
        return self.version is not None and self.version >= version

    def env(self, role: RoleSpec, name: str) -> str | None:
        """The literal value the user set for env var ``name`` on ``role`` (role env over engine env)."""
        value = None
        for var in [*self.spec.engine.env, *role.env]:
            if var.name == name:
                value = var.value
        return value

    def conv_state_layout(self, role: RoleSpec) -> str:
        """Effective ``VLLM_SSM_CONV_STATE_LAYOUT`` of ``role``'s engine.

        The operator renders ``DS`` for hybrid SSM models unless ``spec.kvCache.ssmConvStateLayout``
        says otherwise; an env var the user sets on the engine or role wins over both. vLLM's own
        default (unset) is ``SD`` (``mamba_utils.get_conv_state_layout``).
        """
        from_env = self.env(role, "VLLM_SSM_CONV_STATE_LAYOUT")
        if from_env is not None:
            return from_env
        if self.spec.kv_cache.ssm_conv_state_layout:
            return self.spec.kv_cache.ssm_conv_state_layout
        return ConvStateLayout.DS if self.hybrid_ssm else ConvStateLayout.SD
