"""Developer tools, not shipped and not tests: the local control plane (dev/cluster/), the CPU
example (``python -m dev.cpu_example``, ``make cpu-example``) with what it needs to run rendered
engines on this machine (local_pd.py, vllm_launcher.py), the test node agent that plays the kubelet of
one local-cluster node with local processes (dev/node_agent/) and the CPU example through that node
(``python -m dev.cluster_example``, ``make cluster-example``). Tests may import these; these never
import from tests/."""
