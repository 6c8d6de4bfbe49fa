"""The generated bad inputs of test_robustness.py with the webhook on: refused at admission, naming the
field (a module of its own: while the webhook runs, every PDDeployment write goes through it)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tests.e2e.test_robustness import BAD_VALUES, NAMES, _check_variant, _fresh_namespace

pytestmark = pytest.mark.cluster


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=NAMES, patch=BAD_VALUES)
def test_generated_bad_inputs_with_webhook(cluster, webhook_operator, name, patch):
    ns = _fresh_namespace(cluster)
    try:
        _check_variant(cluster, webhook_operator, ns, name, patch, webhook=True)
    finally:
        cluster.core.delete_namespace(ns)
