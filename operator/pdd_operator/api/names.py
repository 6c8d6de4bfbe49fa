"""Names and label values derived from a PDDeployment's name, valid for every valid PDDeployment name.

A PDDeployment name is a DNS-1123 subdomain: up to 253 characters of ``[a-z0-9.-]``, starting and
ending alphanumeric (custom resources are validated with ``NameIsDNSSubdomain``). What the operator
derives from it must satisfy stricter Kubernetes rules (``k8s.io/apimachinery/pkg/util/validation``):

- a Service name is a DNS-1035 label: at most 63 characters of ``[a-z0-9-]``, starting with a
  letter and ending alphanumeric (``IsDNS1035Label``); the operator uses the same name for every
  child of a role (Deployment, Service, ServiceAccount, Role, RoleBinding);
- a label value is at most 63 characters of ``[A-Za-z0-9._-]``, starting and ending alphanumeric
  (``IsValidLabelValue``).

Names that already satisfy those rules are used as they are (``<name>-<role>``), so existing
deployments keep their children. Others (dots, a leading digit, too long) are made valid and kept
unique by a hash of the whole PDDeployment name: ``<sanitized prefix>-<8 hex>-<role>``.
The router computes the same instance label value from the name (it imports only this package).
"""

from __future__ import annotations

import hashlib
import re

#: Longest DNS-1035 label (Service names) and longest label value.
MAX_LABEL = 63
#: Longest PDDeployment name (DNS-1123 subdomain).
MAX_NAME = 253
#: Hex characters of the name hash appended to names that had to be shortened or sanitized.
HASH_CHARS = 8

DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def name_hash(name: str) -> str:
    """First :data:`HASH_CHARS` hex characters of the SHA-256 of ``name`` (UTF-8)."""
    return hashlib.sha256(name.encode()).hexdigest()[:HASH_CHARS]


def is_dns1035_label(value: str) -> bool:
    """True when ``value`` is a valid DNS-1035 label (a valid Service name)."""
    return len(value) <= MAX_LABEL and bool(DNS1035_LABEL.match(value))


def is_label_value(value: str) -> bool:
    """True when ``value`` is a valid Kubernetes label value."""
    return len(value) <= MAX_LABEL and bool(LABEL_VALUE.match(value))


def is_pddeployment_name(value: str) -> bool:
    """True when ``value`` is a name the apiserver accepts for a PDDeployment (DNS-1123 subdomain)."""
    return 0 < len(value) <= MAX_NAME and bool(DNS1123_SUBDOMAIN.match(value))


def child_name(owner: str, suffix: str) -> str:
    """Name of a child object of PDDeployment ``owner``: ``<owner>-<suffix>`` when that is a DNS-1035 label.

    Otherwise ``<prefix>-<hash>-<suffix>``: ``prefix`` is ``owner`` lower-cased with every character
    outside ``[a-z0-9-]`` replaced by ``-`` (``pdd-`` in front when it does not start with a letter),
    cut so the whole is at most 63 characters; ``hash`` is :func:`name_hash` of ``owner``, so two
    owners never share children. ``suffix`` (a role, ``router``) must be a short DNS-1035 label;
    raises ``ValueError`` otherwise.
    """
    if not is_dns1035_label(suffix) or len(suffix) > MAX_LABEL - HASH_CHARS - 3:
        raise ValueError(f"child name suffix {suffix!r} must be a DNS-1035 label of at most "
                         f"{MAX_LABEL - HASH_CHARS - 3} characters")
    plain = f"{owner}-{suffix}"
    if is_dns1035_label(plain):
        return plain
    prefix = re.sub(r"[^a-z0-9-]", "-", owner.lower())
    if not prefix[:1].isalpha() or not prefix[:1].isascii():
        prefix = "pdd-" + prefix
    room = MAX_LABEL - len(suffix) - HASH_CHARS - 2
    prefix = re.sub(r"-+", "-", prefix[:room]).strip("-")
    return "-".join(p for p in (prefix, name_hash(owner), suffix) if p)


def deployment_name(owner: str, role: str, slot: str) -> str:
    """Name of the Deployment of ``role`` in revision slot ``slot`` (``a`` or ``b``) of PDDeployment ``owner``.

    Slot ``a`` is :func:`child_name` ``(owner, role)``, the name releases before the slots gave the
    role's one Deployment (so they upgrade in place); slot ``b`` is :func:`child_name`
    ``(owner, "<role>-b")``. Raises ``ValueError`` for another slot.
    """
    if slot == "a":
        return child_name(owner, role)
    if slot == "b":
        return child_name(owner, f"{role}-b")
    raise ValueError(f"unknown revision slot {slot!r} (a or b)")


def label_value(owner: str) -> str:
    """The value of the instance and part-of labels for PDDeployment ``owner``.

    ``owner`` itself when it is a valid label value (at most 63 characters), else its first
    characters (ending alphanumeric) and ``-`` :func:`name_hash`, 63 characters at most.
    """
    if is_label_value(owner):
        return owner
    prefix = re.sub(r"[^A-Za-z0-9._-]", "-", owner)[: MAX_LABEL - HASH_CHARS - 1]
    prefix = re.sub(r"[^A-Za-z0-9]+$", "", prefix)
    prefix = re.sub(r"^[^A-Za-z0-9]+", "", prefix)
    return f"{prefix}-{name_hash(owner)}" if prefix else name_hash(owner)
