"""Base class of every API model: camelCase field names on the wire, unknown fields refused."""

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class APIModel(BaseModel):
    """A part of the PDDeployment API.

    Python attributes are snake_case; the Kubernetes wire form (YAML, JSON, the CRD) is camelCase.
    Unknown fields raise ``pydantic.ValidationError`` naming the field, so a typo in a manifest
    given to ``pdd render`` or ``pdd check`` is reported instead of silently dropped.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=True,
    )

    def wire(self) -> dict:
        """Return the camelCase JSON form, without unset optional fields (``None``)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
