"""Which loopback range a dev node agent gives its pods, per local cluster: one definition for the e2e
tests' agents and ``make cluster-example``'s."""

from __future__ import annotations


def pod_cidr(apiserver_port: int) -> str:
    """The loopback /24 the dev node agents of the cluster on ``apiserver_port`` give their pods (the e2e tests'
    agents and ``make cluster-example``'s).

    Agents of two clusters on one machine (``PDD_APISERVER_PORT``) must not share pod IPs: each pod binds
    its ports on its own address, so a second agent's pod on the same address answered the first one's
    probes and requests (seen 2026-12-01: a PDDeployment Ready before its engines had started; 2026-12-05: a
    cluster-example's router on the address a test suite's router had). The default
    cluster (16443) keeps ``127.0.100.0/24``; any other port ``p`` gets ``127.<p // 256>.<p % 256>.0/24``
    (one range per port, never 127.0.0.0/24, where the control plane listens, for ports from 256 on).
    """
    if apiserver_port == 16443:
        return "127.0.100.0/24"
    if not 256 <= apiserver_port <= 65535:
        raise ValueError(f"PDD_APISERVER_PORT {apiserver_port}: expected 256-65535")
    return f"127.{apiserver_port // 256}.{apiserver_port % 256}.0/24"
