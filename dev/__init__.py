"""Developer tools, not shipped and not tests: the local control plane (dev/cluster/) and the CPU
example (``python -m dev.cpu_example``, ``make cpu-example``) with what it needs to run rendered
engines on this machine (local_pd.py, vllm_launcher.py). Tests may import these; these never import
from tests/."""
