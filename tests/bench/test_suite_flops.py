"""The work the operator suite's GFLOP/s figures divide (tecomp.testing.operator_suite)."""
import pytest

from tecomp.testing.operator_suite import conv2d_transpose


@pytest.mark.parametrize("cfg", [(1, 8, 14, 4, 4, 2, 1), (2, 3, 5, 6, 3, 2, 1), (1, 4, 7, 5, 3, 1, 0),
                                 (1, 2, 6, 3, 5, 3, 2), (1, 2, 4, 3, 2, 2, 0)])
def test_a_transposed_conv_counts_only_products_with_input_pixels(cfg):
    n, c, h, o, k, stride, pad = cfg
    case = conv2d_transpose(*cfg)
    out = case.dag.outputs[0].shape[-1]
    # counted the other way round from the gather it is computed as: every input pixel meets
    # every weight tap once (a scatter); keep the products that land in the output
    hits = sum(pad <= i * stride + a < pad + out for i in range(h) for a in range(k))
    assert case.flops() == 2.0 * n * o * c * hits * hits
    dense = case.dag.flop_count()
    assert case.flops() <= dense
    if stride > 1:
        assert case.flops() < dense
