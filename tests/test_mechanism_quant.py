"""Weight-only quantisation of expert matrices (mpl/mechanism/quant.py) and the records of a
low-precision tier's device area (mpl/mechanism/lowprec.py): round-trip error within half a
scale step, the int4 packing, odd shapes and groups that do not divide the input dimension,
determinism, clear errors; on the device area, a requant from a pool entry and a fill from
the host store give the same record, and a dequant gives the quantised weights back in the
experts' dtype and layout."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mpl.mechanism import quant  # noqa: E402
from mpl.mechanism.quant import QuantError  # noqa: E402

torch.set_num_threads(1)


def matrix(rows, cols, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, cols, generator=g) * 0.3).to(dtype)


@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 5), (16, 32), (7, 63)])
def test_int8_round_trip_within_half_a_step_per_output_channel(rows, cols):
    w = matrix(rows, cols, seed=rows * cols)
    s = quant.spec(rows, cols, "int8")
    q, scale = quant.quantize(w, s)
    assert q.dtype == torch.int8 and tuple(q.shape) == (rows, cols)
    assert scale.dtype == torch.float32 and tuple(scale.shape) == (rows,)
    assert int(q.abs().max()) <= 127
    # one scale per row: the row's largest weight maps to +-127
    assert torch.equal(q.abs().amax(dim=1), torch.full((rows,), 127, dtype=torch.int8))
    back = quant.dequantize(q, scale, s)
    err = (back - w).abs()
    assert bool((err <= scale[:, None] / 2 * (1 + 1e-6) + 1e-9).all())
    if cols > 1:                # (a single weight is its own scale: exact)
        assert err.max() > 0    # a real approximation, not a copy


@pytest.mark.parametrize("rows,cols,group", [(4, 32, 32), (4, 64, 16), (3, 10, 4), (5, 7, 64),
                                             (2, 9, 3), (1, 1, 64)])
def test_int4_round_trip_within_half_a_step_per_group(rows, cols, group):
    w = matrix(rows, cols, seed=cols + group)
    s = quant.spec(rows, cols, "int4", group)
    assert s.group == min(group, cols)
    q, scale = quant.quantize(w, s)
    assert q.dtype == torch.uint8 and tuple(q.shape) == (rows, (s.padded + 1) // 2)
    assert tuple(scale.shape) == (rows, s.groups) == (rows, -(-cols // s.group))
    lo, hi = q & 15, q >> 4
    assert int(lo.min()) >= 1 and int(hi.min()) >= 1          # codes q + 8 in 1..15
    back = quant.dequantize(q, scale, s)
    assert tuple(back.shape) == (rows, cols)
    col_scale = scale.repeat_interleave(s.group, dim=1)[:, :cols]
    err = (back - w).abs()
    assert bool((err <= col_scale / 2 * (1 + 1e-6) + 1e-9).all())


def test_int4_packing_two_codes_a_byte_low_nibble_first():
    # one group of 4 columns, max |w| = 7 -> scale 1, codes w + 8
    w = torch.tensor([[1.0, -2.0, 7.0, 0.0], [-7.0, 3.0, 0.0, 0.0]])
    s = quant.spec(2, 4, "int4", 4)
    q, scale = quant.quantize(w, s)
    assert scale.tolist() == [[1.0], [1.0]]
    assert q.tolist() == [[(1 + 8) | ((-2 + 8) << 4), (7 + 8) | (8 << 4)],
                          [(-7 + 8) | ((3 + 8) << 4), 8 | (8 << 4)]]
    assert torch.equal(quant.dequantize(q, scale, s), w)


def test_a_group_that_does_not_divide_the_input_dimension_pads_the_last_group():
    # 10 columns in groups of 4: groups [0:4], [4:8], [8:10] (the last one two columns)
    w = matrix(3, 10, seed=7)
    s = quant.spec(3, 10, "int4", 4)
    assert (s.groups, s.padded) == (3, 12)
    q, scale = quant.quantize(w, s)
    assert torch.allclose(scale[:, 2], w[:, 8:10].abs().amax(dim=1) / 7)
    # an odd padded width: the last byte's high nibble is the zero code
    s7 = quant.spec(2, 7, "int4", 64)
    q7, _ = quant.quantize(matrix(2, 7), s7)
    assert q7.shape == (2, 4) and bool(((q7[:, -1] >> 4) == 8).all())


def test_zeros_stay_zero_and_quantisation_is_deterministic():
    w = matrix(6, 20, seed=3)
    w[2] = 0
    for dtype in ("int8", "int4"):
        s = quant.spec(6, 20, dtype, 8)
        q1, s1 = quant.quantize(w, s)
        q2, s2 = quant.quantize(w.clone(), s)
        assert torch.equal(q1, q2) and torch.equal(s1, s2)
        back = quant.dequantize(q1, s1, s)
        assert torch.equal(back[2], torch.zeros(20))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_16_bit_matrix_is_quantised_in_float32_and_dequantised_into_its_dtype(dtype):
    w = matrix(8, 32, seed=5, dtype=dtype)
    for d in ("int8", "int4"):
        s = quant.spec(8, 32, d)
        q, scale = quant.quantize(w, s)
        back = quant.dequantize(q, scale, s, dtype)
        assert back.dtype == dtype
        ref = quant.dequantize(q, scale, s).to(dtype)
        assert torch.equal(back, ref)


def test_bad_settings_and_inputs_are_clear_errors():
    with pytest.raises(QuantError, match="int8 or int4"):
        quant.spec(4, 4, "int2")
    with pytest.raises(QuantError, match="group must be a positive integer"):
        quant.spec(4, 4, "int4", 0)
    with pytest.raises(QuantError, match="cols must be a positive integer"):
        quant.spec(4, 0, "int8")
    s = quant.spec(4, 8, "int8")
    with pytest.raises(QuantError, match=r"expected a \[4, 8\] matrix, got shape \(8, 4\)"):
        quant.quantize(torch.zeros(8, 4), s)
    with pytest.raises(QuantError, match="floating-point"):
        quant.quantize(torch.zeros(4, 8, dtype=torch.int32), s)
    q, scale = quant.quantize(torch.zeros(4, 8), s)
    with pytest.raises(QuantError, match="codes must be"):
        quant.dequantize(q.to(torch.uint8), scale, s)
    with pytest.raises(QuantError, match="scales must have shape"):
        quant.dequantize(q, scale[:2], s)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", ["int8", "int4"])
def test_the_area_requant_and_host_fill_agree_and_dequant_gives_the_copy_back(transposed, dtype):
    from mpl.mechanism.lowprec import LowPrecArea, QuantLayout
    from mpl.mechanism.pool import SlotPool
    g = torch.Generator().manual_seed(1)
    E, H, inter = 3, 12, 10
    up_shape, down_shape = ((E, H, 2 * inter), (E, inter, H)) if transposed else \
        ((E, 2 * inter, H), (E, H, inter))
    host = {"gate_up_proj": torch.randn(*up_shape, generator=g),
            "gate_up_proj_bias": torch.randn(E, 2 * inter, generator=g),
            "down_proj": torch.randn(*down_shape, generator=g)}
    pool = SlotPool(host, 2, 2, torch.device("cpu"))
    area = LowPrecArea(QuantLayout(host, dtype, transposed=transposed, group=4), 2, pool,
                       label="hierarchy", tier="warm", index=1)
    pool.copy_in(0, host, 1, (0, 1), "demand")
    area.requant(0, 0, (0, 1))
    area.fill_from_host(1, host, 1, (0, 2))
    assert torch.equal(area.data[0], area.data[1])      # the same bytes either way
    assert area.content == [(0, 1), (0, 2)] and area.where == {(0, 1): 0, (0, 2): 1}
    area.dequant(0, pool.stream_base)
    e = pool.stream_base
    assert torch.equal(pool.tensors["gate_up_proj_bias"][e], host["gate_up_proj_bias"][1])
    for name in ("gate_up_proj", "down_proj"):
        w = host[name][1]
        m = w.t() if transposed else w
        s = quant.spec(m.shape[0], m.shape[1], dtype, 4)
        want = quant.dequantize(*quant.quantize(m, s), s)
        assert torch.equal(pool.tensors[name][e], want.t() if transposed else want)
        assert not torch.equal(pool.tensors[name][e], w)
    assert (area.requants, area.host_fills, area.dequants) == (1, 1, 1)
    area.drop((0, 1))
    assert area.content == [None, (0, 2)]
