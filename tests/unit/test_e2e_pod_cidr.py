"""The test node agents' pod CIDR: one loopback range per local cluster (``PDD_APISERVER_PORT``)."""

import ipaddress

import pytest

from dev.node_agent.pod_cidr import pod_cidr


def test_the_default_cluster_keeps_its_range():
    assert pod_cidr(16443) == "127.0.100.0/24"


def test_other_clusters_get_disjoint_loopback_ranges_away_from_the_control_plane():
    nets = {port: ipaddress.ip_network(pod_cidr(port)) for port in (16443, 16449, 24443, 24449, 25443, 256, 65535)}
    loopback, control_plane = ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("127.0.0.0/24")
    for net in nets.values():
        assert net.subnet_of(loopback) and not net.overlaps(control_plane), net
    assert len(set(nets.values())) == len(nets)
    assert nets[24443] == ipaddress.ip_network("127.95.123.0/24")


@pytest.mark.parametrize("port", [0, 255, 65536])
def test_a_port_outside_the_range_is_refused(port):
    with pytest.raises(ValueError, match="PDD_APISERVER_PORT"):
        pod_cidr(port)
