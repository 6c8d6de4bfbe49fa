"""UCX_TLS and UCX_NET_DEVICES read as UCX reads them (issue 9, fixT item 5): openucx/ucx splits the value at ',' with
nothing trimmed (parser.c ucs_config_sscanf_array, strtok_r) and compares every name with strcmp (``all``:
ucs_config_sscanf_allow_list; transports, aliases and devices: ucp_context.c ucp_str_array_search, v1.18.0-v1.20.0).
``TCP``, ``RC``, `` cuda_copy``, ``ALL`` or ``MLX5_0:1`` therefore name nothing: a finding
(ucx-name-unrecognised), never silently the lower-case name. Before, the reader lower-cased and trimmed each name."""

from __future__ import annotations

import pytest

from pdd_operator.compat.rules.ucx_tls import ethernet_only_devices, host_only_transports, no_rdma_transport
from pdd_operator.vllm.ucx_tls import allows_rdma, parse, unrecognised_devices
from tests.unit.test_turn2_variants import rules
from tests.unit.test_ucx_rdma_transport import _pair, _run

RULE = "ucx-name-unrecognised"


@pytest.mark.parametrize(("value", "mode", "unrecognised", "unknown", "rdma"), [
    ("rc,cuda_copy", "allow", (), (), True),
    ("RC,cuda_copy", "allow", ("RC",), (), False),          # RC matches no transport: no RDMA left
    ("rc, cuda_copy", "allow", (" cuda_copy",), (), True),   # a blank is part of the name
    ("Rc_X,CUDA", "allow", ("Rc_X", "CUDA"), (), False),
    ("ALL", "allow", ("ALL",), (), False),                   # strcmp with "all": an allow list of one unknown name
    ("all", "all", (), (), True),
    ("^TCP", "deny", ("TCP",), (), True),                    # denies nothing UCX has
    ("^tcp", "deny", (), (), True),
    ("rc,,cuda_copy", "allow", (), (), True),                # strtok_r drops the empty name
    ("foo,rc", "allow", (), ("foo",), None),                 # not known in any case: not judged
    ("cuda_copy\n", "allow", ("cuda_copy\n",), (), False),   # a YAML block scalar's newline
])
def test_names_as_ucx_matches_them(value, mode, unrecognised, unknown, rdma):
    tls = parse(value)
    assert (tls.mode, tls.unrecognised, tls.unknown) == (mode, unrecognised, unknown)
    assert allows_rdma(value) is rdma


def test_the_transport_rules_leave_mis_cased_lists_to_the_name_rule():
    assert host_only_transports("TCP,SELF") is None and host_only_transports("tcp,self") == ["tcp", "self"]
    assert no_rdma_transport("RC,cuda_copy") is None and no_rdma_transport("cuda_copy,tcp") == ["cuda_copy", "tcp"]


@pytest.mark.parametrize(("value", "bad"), [
    ("MLX5_0:1", ("MLX5_0:1",)), ("mlx5_0:1,Mlx5_1:1", ("Mlx5_1:1",)), ("ALL", ("ALL",)), (" mlx5_0:1", (" mlx5_0:1",)),
    ("EFA_0", ("EFA_0",)), ("eth0, lo", (" lo",)),
    ("mlx5_0:1", ()), ("all", ()), ("eth0", ()), ("Eth0", ()),  # an interface may be any case
])
def test_device_names(value, bad):
    assert unrecognised_devices(value) == bad


def test_ethernet_only_devices_reads_all_exactly():
    assert ethernet_only_devices("all") is None and ethernet_only_devices("ALL") is None
    assert ethernet_only_devices("eth0,eth1") == ["eth0", "eth1"]


@pytest.mark.parametrize("env", [{"UCX_TLS": "RC,CUDA_COPY"}, {"UCX_TLS": "rc,Cuda_Ipc,cuda_copy"},
                                 {"UCX_NET_DEVICES": "MLX5_0:1"}, {"UCX_NET_DEVICES": "ALL"},
                                 {"UCX_TLS": "TCP,self"}])
def test_mis_cased_names_are_a_finding(tmp_path, capsys, env):
    code, out = _run(tmp_path, capsys, _pair(env))
    said = [f for r in out["results"] for f in r["findings"] if f["rule"] == RULE]
    assert code == 0 and said and all("does not recognise" in f["message"] for f in said), out
    assert "ucx-tls-no-cuda-transport" not in rules(out), out   # not read as tcp,self


@pytest.mark.parametrize("env", [{"UCX_TLS": "rc,cuda_copy"}, {"UCX_NET_DEVICES": "mlx5_0:1"}, {"UCX_TLS": "foo,rc"},
                                 {"UCX_NET_DEVICES": "Eth0"}, {}])
def test_ucx_names_controls(tmp_path, capsys, env):
    _, out = _run(tmp_path, capsys, _pair(env))
    assert RULE not in rules(out), out
