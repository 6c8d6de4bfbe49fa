"""The held-back variants of test_robustness_variants.py with the webhook on: what cannot run is
refused at admission naming the field; the rest runs (a module of its own: while the webhook runs,
every PDDeployment write goes through it). Run alone, its operator is the only one writing."""

from __future__ import annotations

import pytest

from tests.e2e.test_robustness_variants import check_variant
from tests.robustness_variants import VARIANTS

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.id for v in VARIANTS])
def test_variant_with_webhook(cluster, webhook_operator, namespace, variant):
    check_variant(cluster, webhook_operator, namespace, variant, webhook=True)
