"""folio's reference (de)quantizers against the gguf package (gguf.quants), bit for bit.

folio_quant_tool runs src/tensor/{dequantize,quantize}.cc on whole files. Every
dequantized float is compared as its 32-bit pattern, so NaN payloads count.
Three things gguf's numpy code leaves undefined are compared only as far as
they are defined, each explained where it is masked:

1. Casting NaN or +-inf to uint8/int8 (numpy's astype) is undefined behaviour
   in C, so a code whose float product is not finite is skipped; folio makes
   it code 0 (tests/tensor/quantize_test.cc pins that).
2. Which NaN numpy's max/min/abs().max() reductions return depends on the SIMD
   path (lanes give the canonical NaN, the scalar tail the input's own bits),
   and which sign a min/max of +0 and -0 has depends on lane order. Scales
   derived from such a reduction are compared as "NaN" or up to the sign.
3. When both terms of d*q + m (or d*q - dm) are NaN, IEEE 754 lets either
   payload through; there only "is NaN" is compared.

Q8_K is not in gguf.quants at all: it is checked against the small numpy
reference below, written from the GGUF reference definition.
"""
import subprocess

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as T
from gguf import quants

DEQUANT_TYPES = ["f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0",
                 "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q8_k",
                 "iq4_nl", "iq4_xs", "mxfp4", "nvfp4"]
QUANT_TYPES = ["f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q8_k"]
# folio encodes these with its own scale search (gguf.quants cannot encode
# them): tests/tensor/quantize_test.cc checks their round trips, and
# test_searched_round_trip below decodes folio's bytes with gguf.
SEARCHED_TYPES = ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs", "nvfp4"]
# gguf encodes MXFP4 with a float32 log2 (test_quantize_mxfp4_byte_exact).
GGUF_EXACT_OTHER = ["mxfp4"]

# gguf 0.19.0 knows these, folio's DType does not list them yet.
GGUF_ONLY = {"Q1_0"}

NUM_BLOCKS = 4096
CANONICAL_NAN = 0x7FC00000

# Byte offsets of the f16 scale fields, first the one multiplying q, then (for
# d*q + m types) the offset term.
F16_FIELDS = {
    "q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0],
    "q2_k": [80, 82], "q3_k": [108], "q4_k": [0, 2], "q5_k": [0, 2], "q6_k": [208],
    "iq4_nl": [0], "iq4_xs": [0],
}
# Types whose scales are 8-bit (E8M0, E4M3) and decode to neither NaN nor
# infinity: random bytes cover every scale.
BYTE_SCALED = {"mxfp4", "nvfp4"}
TWO_TERM = {"q4_1", "q5_1", "q2_k", "q4_k", "q5_k"}

SPECIAL_F16 = np.array([
    0x0000, 0x8000,                  # +-0
    0x0001, 0x8001, 0x03FF, 0x0200,  # subnormals
    0x0400, 0x3C00, 0xBC00,          # smallest normal, +-1
    0x7BFF, 0xFBFF, 0x7800,          # huge
    0x7C00, 0xFC00,                  # +-inf
    0x7E00, 0xFE00, 0x7C01, 0x7D55, 0xFFFF,  # NaNs: quiet, negative, signalling, payloads
], dtype=np.uint16)

SPECIAL_F32 = np.array([
    0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x3F800000,
    0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
    0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FA00000, 0xFFFFFFFF,
], dtype=np.uint32)


@pytest.fixture(scope="module")
def tool(build_dir):
    path = build_dir / "tests" / "folio_quant_tool"
    assert path.exists(), f"{path} is missing; build the folio_quant_tool target"
    return path


def run_tool(tool, tmp_path, mode, type_name, data: bytes) -> bytes:
    src, dst = tmp_path / f"{mode}_{type_name}.in", tmp_path / f"{mode}_{type_name}.out"
    src.write_bytes(data)
    result = subprocess.run([str(tool), mode, type_name, str(src), str(dst)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return dst.read_bytes()


def qtype(type_name):
    return T[type_name.upper()]


def block_bytes(type_name):
    return GGML_QUANT_SIZES[qtype(type_name)][1]


# ---- the table of types --------------------------------------------------------

def test_dtype_table_matches_gguf(tool):
    out = subprocess.run([str(tool), "types"], capture_output=True, text=True, check=True).stdout
    folio = {}
    for line in out.splitlines():
        type_id, name, block_elems, type_bytes, dequantizable, quantizable = line.split()
        folio[int(type_id)] = (name, int(block_elems), int(type_bytes), dequantizable == "1", quantizable == "1")

    for t, (block_elems, type_bytes) in GGML_QUANT_SIZES.items():
        if t.name in GGUF_ONLY:
            assert t.value not in folio, f"{t.name} is in folio now: take it out of GGUF_ONLY"
            continue
        assert t.value in folio, f"gguf type {t.name} ({t.value}) is missing from dtype.cc"
        name, folio_elems, folio_bytes, _, _ = folio[t.value]
        assert name == t.name.lower()
        if t == T.Q8_1:
            # gguf-py still lists Q8_1's old layout (float d, float s: 40 bytes);
            # ggml's block_q8_1 is now two halves + 32 int8 = 36 bytes, as
            # its static_assert says and dtype.cc has it.
            assert (block_elems, type_bytes) == (32, 40)
            assert (folio_elems, folio_bytes) == (32, 36)
            continue
        assert (folio_elems, folio_bytes) == (block_elems, type_bytes), t.name
    assert set(folio) <= {t.value for t in GGML_QUANT_SIZES}
    assert {row[0] for row in folio.values() if row[3]} == set(DEQUANT_TYPES)
    assert {row[0] for row in folio.values() if row[4]} == set(QUANT_TYPES + SEARCHED_TYPES + GGUF_EXACT_OTHER)


# ---- dequantization --------------------------------------------------------

def random_blocks(rng, type_name):
    """NUM_BLOCKS random blocks; in half of them each scale field is a special value."""
    if type_name == "f32":
        words = rng.integers(0, 2**32, NUM_BLOCKS * 8, dtype=np.uint32)
        words[: len(SPECIAL_F32)] = SPECIAL_F32
        return words.view(np.uint8).reshape(-1, 4)
    if type_name in ("f16", "bf16"):  # every 16-bit pattern, then random ones
        words = np.concatenate([np.arange(65536, dtype=np.uint16),
                                rng.integers(0, 65536, 8192, dtype=np.uint16)])
        return words.view(np.uint8).reshape(-1, 2)
    blocks = rng.integers(0, 256, (NUM_BLOCKS, block_bytes(type_name)), dtype=np.uint8)
    if type_name == "q8_k":
        d = blocks[:, :4].copy().view(np.uint32)
        pick = rng.random(NUM_BLOCKS) < 0.5
        d[pick, 0] = rng.choice(SPECIAL_F32, pick.sum())
        blocks[:, :4] = d.view(np.uint8)
        return blocks
    if type_name in BYTE_SCALED:
        return blocks
    for offset in F16_FIELDS[type_name]:
        field = blocks[:, offset:offset + 2].copy().view(np.uint16)
        pick = rng.random(NUM_BLOCKS) < 0.5
        field[pick, 0] = rng.choice(SPECIAL_F16, pick.sum())
        blocks[:, offset:offset + 2] = field.view(np.uint8)
    return blocks


def q8_k_dequantize(blocks):
    """Q8_K from the GGUF definition (gguf.quants has none): x = d * q, float d."""
    d = blocks[:, :4].copy().view(np.float32)
    q = blocks[:, 4:260].copy().view(np.int8).astype(np.float32)
    with np.errstate(all="ignore"):
        return (d * q).reshape(-1)


def reference_dequantize(type_name, blocks):
    if type_name == "q8_k":
        with pytest.raises(NotImplementedError):  # if gguf gains Q8_K, compare with it instead
            quants.dequantize(blocks, T.Q8_K)
        return q8_k_dequantize(blocks)
    with np.errstate(all="ignore"):
        return quants.dequantize(blocks, qtype(type_name)).reshape(-1)


def both_terms_nan(type_name, blocks):
    """Elements of d*q + m types where both terms are NaN (see the module note, 3)."""
    if type_name not in TWO_TERM:
        return np.zeros(blocks.shape[0] * GGML_QUANT_SIZES[qtype(type_name)][0], dtype=bool)
    scale_at, offset_at = F16_FIELDS[type_name]
    only_product, only_offset = blocks.copy(), blocks.copy()
    only_product[:, offset_at:offset_at + 2] = 0  # m or dmin = 0 leaves d*q
    only_offset[:, scale_at:scale_at + 2] = 0     # d = 0 leaves the offset term
    return np.isnan(reference_dequantize(type_name, only_product)) & np.isnan(reference_dequantize(type_name, only_offset))


@pytest.mark.parametrize("type_name", DEQUANT_TYPES)
def test_dequantize_bit_exact(tool, tmp_path, type_name):
    rng = np.random.default_rng(20240 + DEQUANT_TYPES.index(type_name))
    blocks = random_blocks(rng, type_name)
    ours = np.frombuffer(run_tool(tool, tmp_path, "dequantize", type_name, blocks.tobytes()), dtype=np.uint32)
    ref = reference_dequantize(type_name, blocks).view(np.uint32)
    assert ours.shape == ref.shape

    loose = both_terms_nan(type_name, blocks)
    assert loose.mean() < 0.05  # the mask must not hide the test
    mismatch = np.flatnonzero((ours != ref) & ~loose)
    assert mismatch.size == 0, (
        f"{mismatch.size} of {ours.size} differ; first at {mismatch[0]}: "
        f"folio {ours[mismatch[0]]:#010x}, gguf {ref[mismatch[0]]:#010x}")
    assert np.isnan(ours[loose].view(np.float32)).all()
    # The specials really were exercised.
    values = ref.view(np.float32)
    if type_name in BYTE_SCALED:
        assert not np.isnan(values).any() and (values == 0).any()  # no scale byte is NaN
    else:
        assert np.isnan(values).any() and np.isinf(values).any()


# ---- quantization ------------------------------------------------------------

NUM_ORDINARY = 1024


def random_rows(rng, block):
    """Float32 blocks of many kinds, one kind after another: first NUM_ORDINARY
    ordinary ones (normal values, scales from 1e-9 to 1e6), then all-zero
    (+0, -0, mixed), one huge element, subnormal, near the smallest normal,
    with +-inf, grids of halves (exact rounding ties), and with NaNs."""
    n = NUM_ORDINARY // 2
    kinds = []
    scale = 10.0 ** rng.uniform(-9, 6, (n, 1))  # f16 scales from underflow to overflow
    kinds.append(rng.standard_normal((n, block)) * scale)
    kinds.append(rng.standard_normal((n, block)) * 10.0 ** rng.uniform(-2, 2, (n, 1)))
    zeros = np.zeros((n, block))
    zeros[n // 3: 2 * n // 3] = -0.0
    zeros[2 * n // 3:] = np.where(rng.random((n - 2 * n // 3, block)) < 0.5, 0.0, -0.0)
    kinds.append(zeros)
    huge = np.where(rng.random((n, 1)) < 0.5, 0.0, rng.standard_normal((n, block)))
    huge[np.arange(n), rng.integers(0, block, n)] = rng.choice([3e38, -3e38, 1e30, -1e30, 65504 * 16, -1e6], n)
    kinds.append(huge)
    kinds.append(rng.standard_normal((n, block)) * 1e-40)   # float32 subnormals
    kinds.append(rng.standard_normal((n, block)) * 1e-38)   # around the smallest normal
    inf = rng.standard_normal((n, block))
    inf[np.arange(n), rng.integers(0, block, n)] = rng.choice([np.inf, -np.inf], n)
    inf[: n // 4, 0], inf[: n // 4, -1] = np.inf, -np.inf
    kinds.append(inf)
    # Grids of halves whose largest element lands the scale on 1: exact ties.
    for top in (8, 15, 16, 31, 127):
        grid = rng.integers(-2 * top, 2 * top + 1, (n // 4, block)) / 2
        grid[np.arange(n // 4), rng.integers(0, block, n // 4)] = rng.choice([top, -top], n // 4)
        kinds.append(grid)
    rows = np.concatenate(kinds).astype(np.float32)
    # NaNs: mostly the canonical one, some with other payloads and signs.
    nan = rng.standard_normal((n, block)).astype(np.float32)
    nan_bits = rng.choice(np.array([CANONICAL_NAN] * 4 + [0xFFC00000, 0x7FA00000, 0x7F800001, 0xFFFFFFFF],
                                   dtype=np.uint32), n)
    where = rng.integers(0, block, n)
    nan.view(np.uint32)[np.arange(n), where] = nan_bits
    return np.concatenate([rows, nan])


def q8_k_quantize(x):
    """Q8_K from the GGUF reference definition (gguf.quants has none)."""
    n = x.shape[0]
    ax = np.where(np.isnan(x), 0, np.abs(x))  # NaNs take no part in the maximum
    i = ax.argmax(axis=-1)[:, None]
    amax, mx = np.take_along_axis(ax, i, -1), np.take_along_axis(x, i, -1)
    zero = amax[:, 0] == 0
    with np.errstate(all="ignore"):
        iscale = np.float32(-127) / mx
        v = np.rint(iscale * x)  # halves to even
        q = np.where(np.isfinite(v), np.clip(v, -127, 127), 0).astype(np.int8)
        d = (np.float32(1) / iscale).astype(np.float32)
    q[zero], d[zero] = 0, 0
    bsums = q.astype(np.int16).reshape(n, 16, 16).sum(axis=-1, dtype=np.int16)
    return np.concatenate([d.view(np.uint8), q.view(np.uint8), bsums.view(np.uint8)], axis=-1)


def gguf_products(type_name, x):
    """The float each code is cast from in gguf's numpy code (before the +k.5 and trunc)."""
    with np.errstate(all="ignore"):
        if type_name == "q8_0":
            d = np.abs(x).max(axis=-1, keepdims=True) / 127
            return x * np.where(d == 0, 0, 1 / d)
        if type_name in ("q4_0", "q5_0"):
            mx = np.take_along_axis(x, np.abs(x).argmax(axis=-1, keepdims=True), -1)
            d = mx / (-8 if type_name == "q4_0" else -16)
            return x * np.where(d == 0, 0, 1 / d)
        mx, mn = x.max(axis=-1, keepdims=True), x.min(axis=-1, keepdims=True)
        d = (mx - mn) / (15 if type_name == "q4_1" else 31)
        return (x - mn) * np.where(d == 0, 0, 1 / d)


LAYOUT = {  # f16 header fields, then where the low nibbles / high bits / int8 codes are
    "q4_0": dict(fields=["d"], qh=None, qs=2),
    "q4_1": dict(fields=["d", "m"], qh=None, qs=4),
    "q5_0": dict(fields=["d"], qh=2, qs=6),
    "q5_1": dict(fields=["d", "m"], qh=4, qs=8),
    "q8_0": dict(fields=["d"], qh=None, qs=2),
}


def unpack(type_name, blocks):
    """(header f16 fields [n, k], codes [n, 32]) of raw blocks."""
    layout = LAYOUT[type_name]
    header = blocks[:, : 2 * len(layout["fields"])].copy().view(np.uint16)
    if type_name == "q8_0":
        return header, blocks[:, 2:34].copy().view(np.int8).astype(np.int32)
    qs = blocks[:, layout["qs"]: layout["qs"] + 16].astype(np.int32)
    codes = np.concatenate([qs & 15, qs >> 4], axis=-1)
    if layout["qh"] is not None:
        qh = blocks[:, layout["qh"]: layout["qh"] + 4].copy().view(np.uint32).astype(np.int64)
        codes |= (((qh >> np.arange(32)) & 1) << 4).astype(np.int32)
    return header, codes


def f16_is_nan(h):
    return ((h & 0x7C00) == 0x7C00) & ((h & 0x03FF) != 0)


@pytest.mark.parametrize("type_name", QUANT_TYPES)
def test_quantize_byte_exact(tool, tmp_path, type_name):
    rng = np.random.default_rng(777 + QUANT_TYPES.index(type_name))
    if type_name in ("f32", "f16", "bf16"):
        x = half_boundary_values(rng)
    else:
        x = random_rows(rng, GGML_QUANT_SIZES[qtype(type_name)][0])
    ours = np.frombuffer(run_tool(tool, tmp_path, "quantize", type_name, x.tobytes()), dtype=np.uint8)

    if type_name == "q8_k":
        with pytest.raises(NotImplementedError):  # if gguf gains Q8_K, compare with it instead
            quants.quantize(x, T.Q8_K)
        ref = q8_k_quantize(x).reshape(-1)
        assert np.array_equal(ours, ref)
        return
    with np.errstate(all="ignore"):
        ref = quants.quantize(x.reshape(-1), qtype(type_name)).view(np.uint8).reshape(-1)
    if type_name in ("f32", "f16", "bf16"):
        assert np.array_equal(ours, ref)  # pure conversions: everything is defined
        return

    ours, ref = ours.reshape(x.shape[0], -1), ref.reshape(x.shape[0], -1)
    (ours_header, ours_codes), (ref_header, ref_codes) = unpack(type_name, ours), unpack(type_name, ref)

    # Module note, 1: codes cast from a non-finite float are undefined in gguf.
    defined_code = np.isfinite(gguf_products(type_name, x))
    assert np.array_equal(ours_codes[defined_code], ref_codes[defined_code])

    # Module note, 2: scales that came out of a NaN-propagating or zero-signed
    # max/min reduction. argmax (q4_0, q5_0) is exact and is not masked.
    exact_header = np.ones(ref_header.shape, dtype=bool)
    sign_free = np.zeros(ref_header.shape, dtype=bool)
    if type_name in ("q8_0", "q4_1", "q5_1"):
        other_nan = (np.isnan(x) & (x.view(np.uint32) != CANONICAL_NAN)).any(axis=-1)
        exact_header[other_nan] = False
        assert (f16_is_nan(ours_header[other_nan]) == f16_is_nan(ref_header[other_nan])).all()
    if type_name in ("q4_1", "q5_1"):
        zeros = x == 0
        mixed_zeros = (zeros & np.signbit(x)).any(axis=-1) & (zeros & ~np.signbit(x)).any(axis=-1)
        sign_free[:, 1] = mixed_zeros & (x.min(axis=-1) == 0)                  # m
        sign_free[:, 0] = mixed_zeros & (x.max(axis=-1) == 0) & sign_free[:, 1]  # d of an all-zero block
    mask = np.where(sign_free, 0x7FFF, 0xFFFF).astype(np.uint16)
    assert np.array_equal((ours_header & mask)[exact_header], (ref_header & mask)[exact_header])

    # In blocks defined throughout, the bytes are simply equal; ordinary data
    # (the first NUM_ORDINARY rows) always is, and so are most rows overall.
    whole = defined_code.all(axis=-1) & exact_header.all(axis=-1) & ~sign_free.any(axis=-1)
    assert whole[:NUM_ORDINARY].all()
    assert whole.sum() > 2000 and defined_code.mean() > 0.55
    assert np.array_equal(ours[whole], ref[whole])
    assert np.array_equal(ours[whole], ref[whole])


def half_boundary_values(rng):
    """Every sign and exponent, with random mantissas and mantissas on, just
    under and just over each rounding boundary f16 and bf16 can have."""
    sign_exp = np.arange(512, dtype=np.uint32) << 23
    mantissas = [rng.integers(0, 1 << 23, 2048, dtype=np.uint32)]
    for shift in range(13, 24):
        top = rng.integers(0, 1 << (23 - shift), 16, dtype=np.uint32) << shift
        for delta in (-1, 0, 1):
            mantissas.append((top + np.uint32((1 << (shift - 1)) + delta)) & np.uint32(0x7FFFFF))
    mantissas = np.concatenate(mantissas + [np.array([0, 1, 0x7FFFFF], dtype=np.uint32)])
    return (sign_exp[:, None] | mantissas[None, :]).reshape(-1).view(np.float32)


# ---- MXFP4: gguf's encoder ------------------------------------------------------

def mxfp4_exponent_defined(x):
    """Blocks whose scale byte gguf defines: amax NaN or 0 (byte 0), or
    floor(log2(amax)) - 2 + 127 in [0, 255] (numpy's cast to uint8 is
    undefined outside it, and for infinities). Blocks whose amax lies within
    2^-20 below a power of two are left out too: float32 log2 may round up to
    the integer there, and numpy's log2 and the C library's differ on which."""
    with np.errstate(all="ignore"):
        amax = np.abs(x).max(axis=-1)
        e = np.floor(np.log2(amax)) - 2 + 127
        mantissa, _ = np.frexp(amax)
        near_power = (mantissa > 1 - 2.0 ** -21) & (mantissa < 1)
    return np.isnan(amax) | (amax == 0) | (np.isfinite(e) & (e >= 0) & (e <= 255) & ~near_power)


def test_quantize_mxfp4_byte_exact(tool, tmp_path):
    rng = np.random.default_rng(7770)
    x = random_rows(rng, 32)
    # Powers of two and values just under them: the exponent's edges.
    edges = np.ldexp(1.0, rng.integers(-120, 120, (256, 1))) * rng.choice([1.0, 1 - 2.0 ** -12, 1.5], (256, 32))
    x = np.concatenate([x, edges.astype(np.float32)])
    ours = np.frombuffer(run_tool(tool, tmp_path, "quantize", "mxfp4", x.tobytes()), dtype=np.uint8)
    ours = ours.reshape(x.shape[0], -1)
    with np.errstate(all="ignore"):
        ref = quants.quantize(x.reshape(-1), T.MXFP4).view(np.uint8).reshape(x.shape[0], -1)
    defined = mxfp4_exponent_defined(x)
    assert defined[:NUM_ORDINARY].all() and defined.mean() > 0.7
    assert np.array_equal(ours[defined], ref[defined])
    # Where gguf's byte is undefined folio saturates: 255 for infinities, 0 below 2^-125.
    amax = np.abs(x).max(axis=-1)
    assert (ours[np.isinf(amax) & ~np.isnan(amax), 0] == 255).all()
    assert (ours[(amax > 0) & (amax < 2.0 ** -125), 0] == 0).all()


# ---- folio's searched encoders, decoded by gguf ----------------------------------

@pytest.mark.parametrize("type_name", ["iq4_nl", "iq4_xs", "mxfp4", "nvfp4"])
def test_searched_round_trip(tool, tmp_path, type_name):
    """folio's bytes decode with gguf's dequantizer to what folio decodes, and
    the error on normal data is no worse than gguf's Q4_0 (4.5 bits) for the
    IQ4 types, and within twice it for the FP4 types, whose grid (0, 0.5, 1,
    1.5, 2, 3, 4, 6) has only 8 magnitudes and coarse steps at the top."""
    rng = np.random.default_rng(4242 + len(type_name))
    x = (rng.standard_normal((2048, 256)) * 10.0 ** rng.uniform(-3, 1, (2048, 1))).astype(np.float32)
    blocks = run_tool(tool, tmp_path, "quantize", type_name, x.tobytes())
    assert len(blocks) == x.size // GGML_QUANT_SIZES[qtype(type_name)][0] * block_bytes(type_name)
    ref = quants.dequantize(np.frombuffer(blocks, dtype=np.uint8), qtype(type_name)).reshape(x.shape)
    ours = np.frombuffer(run_tool(tool, tmp_path, "dequantize", type_name, blocks), dtype=np.float32).reshape(x.shape)
    assert np.array_equal(ours.view(np.uint32), ref.view(np.uint32))
    q4 = quants.dequantize(quants.quantize(x, T.Q4_0), T.Q4_0)
    err, err_q4 = ((ref - x) ** 2).sum(axis=-1), ((q4 - x) ** 2).sum(axis=-1)
    if type_name == "nvfp4":
        # E4M3 scales bottom out at 2^-10: rows of tiny values lose precision
        # that Q4_0's f16 scale keeps. Compare rows whose scales are normal.
        big = np.abs(x).max(axis=-1) > 1.0
        err, err_q4 = err[big], err_q4[big]
    bound = 2.0 if type_name in BYTE_SCALED else 1.0
    assert err.sum() <= bound * err_q4.sum(), (err.sum(), err_q4.sum())


# ---- `folio quantize` files, read by the gguf package --------------------------

@pytest.mark.parametrize("type_name", ["iq4_nl", "iq4_xs", "mxfp4", "nvfp4"])
def test_quantized_file_reads_back_in_gguf(tool, build_dir, tmp_path, type_name):
    """A small model written by gguf's own writer, quantized by `folio
    quantize --type TYPE`: gguf's reader finds every tensor with the type the
    recipe gives it, and gguf's dequantizer gives folio's floats bit for bit,
    close to the originals."""
    from gguf import GGUFReader, GGUFWriter
    folio = build_dir / "folio"
    assert folio.exists(), f"{folio} is missing; build the folio target"
    rng = np.random.default_rng(99)
    src = tmp_path / "in.gguf"
    w = GGUFWriter(str(src), "llama")
    w.add_name("tiny")
    tensors = {
        "token_embd.weight": rng.standard_normal((16, 256)).astype(np.float32) * 0.05,
        "blk.0.attn_norm.weight": np.ones(256, dtype=np.float32),
        "blk.0.attn_q.weight": rng.standard_normal((8, 256)).astype(np.float32) * 0.05,
        "blk.0.ffn_down.weight": rng.standard_normal((4, 896)).astype(np.float32) * 0.05,
        "output.weight": rng.standard_normal((16, 256)).astype(np.float32) * 0.05,
    }
    for name, value in tensors.items():
        w.add_tensor(name, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out = tmp_path / f"out_{type_name}.gguf"
    result = subprocess.run([str(folio), "quantize", str(src), str(out), "--type", type_name, "-t", "1"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr

    reader = GGUFReader(str(out))
    found = {t.name: t for t in reader.tensors}
    assert set(found) == set(tensors)
    want_type = {"blk.0.attn_q.weight": type_name,
                 # 896 is not whole 256-blocks: IQ4_XS falls back to IQ4_NL.
                 "blk.0.ffn_down.weight": "iq4_nl" if type_name == "iq4_xs" else type_name,
                 "output.weight": "q6_k", "token_embd.weight": type_name, "blk.0.attn_norm.weight": "f32"}
    for name, t in found.items():
        assert t.tensor_type.name.lower() == want_type[name], name
        if t.tensor_type.name.lower() != type_name and name != "blk.0.ffn_down.weight":
            continue
        raw = np.asarray(t.data).view(np.uint8)
        ref = quants.dequantize(raw, t.tensor_type).reshape(-1)
        ours = np.frombuffer(run_tool(tool, tmp_path, "dequantize", t.tensor_type.name.lower(), raw.tobytes()),
                             dtype=np.float32)
        assert np.array_equal(ours.view(np.uint32), ref.view(np.uint32)), name
        x = tensors[name].reshape(-1)
        assert np.sqrt(((ref - x) ** 2).sum() / (x ** 2).sum()) < 0.15, name
