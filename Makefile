# pdd-operator: the README's commands.
.PHONY: demo test unit e2e down crd chart helm bootstrap bench bench-scale cpu-example cluster-example conformance

demo:        ## the main job end to end on the embedded local cluster (left running; `make down` stops it)
	bash scripts/demo.sh

test:        ## the whole test suite: unit tests, then end-to-end tests on the local control plane
	bash scripts/test.sh

unit: bootstrap
	.venv/bin/pytest -q tests/unit

e2e: bootstrap
	.venv/bin/pytest -q tests/e2e

down:
	bash scripts/down.sh

crd: bootstrap  ## regenerate crds/ from the API models
	.venv/bin/pdd crd --write crds/pddeployment.yaml

chart: bootstrap  ## regenerate the chart's generated files (CRD, RBAC rules, webhook entry) and docs/rbac.md
	.venv/bin/pdd chart-files charts/pdd-operator
	.venv/bin/pdd rbac --markdown > docs/rbac.md

helm:  ## build helm into ~/.cache/pdd-operator/bin (prints its path)
	bash scripts/install-helm.sh

bootstrap:
	bash scripts/bootstrap.sh

bench: bootstrap  ## benchmarks (bench/README.md); each reports ratios against a baseline from the same run
	.venv/bin/python bench/bench_check.py
	.venv/bin/python bench/bench_webhook.py
	.venv/bin/python bench/bench_router.py
	.venv/bin/python bench/bench_rollout.py

bench-scale: bootstrap  ## 1,000 PDDeployments on kwok against the same children applied directly (bench/README.md; 20-40 min on 2 cores, PDD_BENCH_N=200 for a shorter run)
	.venv/bin/python bench/bench_scale.py

MODEL ?= llama
CONNECTOR ?= NixlConnector
cpu-example: bootstrap  ## real vLLM P/D on this CPU: the rendered CPU example's engines and router on 127.0.0.1 (Ctrl-C stops); MODEL=nemotron_h, CONNECTOR=NixlPushConnector
	.venv/bin/python -m dev.cpu_example --model $(MODEL) --connector $(CONNECTOR)

cluster-example: bootstrap  ## the CPU example through the local cluster: kubectl apply, the scheduler, real vLLM engines and the router as pods of the dev node agent's node (Ctrl-C stops); MODEL=, CONNECTOR= as above
	.venv/bin/python -m dev.cluster_example --model $(MODEL) --connector $(CONNECTOR)

conformance: bootstrap  ## the compatibility rules against real vLLM on the CPU: a refused and an accepted P/D pair per rule family, docs/conformance.md (not part of make test; ~1 min per pair)
	.venv/bin/python -m dev.conformance
