"""The CPU sampler draws what torch.multinomial draws, fast_cpu_sampling leaves torch as it found it, and the
precision a model computes in on CPU is the one asked for (auto: what oneDNN says the CPU multiplies).

Needs torch (the trl, verl and eval tox environments have it; py311 has not: skipped there).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from trade_core.cpu_generation import autocast, cpu_precision, fast_cpu_sampling, inverse_cdf_sample  # noqa: E402

WEIGHTS = [0.0, 0.30, 0.05, 0.0, 0.25, 0.15, 0.25, 0.0]
"""A small vocabulary with zero-probability entries first, inside and last."""
DRAWS = 40_000
CHI2_DF4_P001 = 18.47
"""The chi-square value a 4-degree-of-freedom statistic exceeds with probability 0.001."""


def _counts(tokens: torch.Tensor) -> torch.Tensor:
    return torch.bincount(tokens.flatten(), minlength=len(WEIGHTS)).to(torch.float64)


def _chi2(observed: torch.Tensor, expected: torch.Tensor) -> float:
    used = expected > 0
    return float((((observed - expected) ** 2)[used] / expected[used]).sum())


def _rows(weights: list[float], scale: float = 1.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return (torch.tensor(weights, dtype=dtype) * scale).expand(DRAWS, len(weights))


@pytest.mark.parametrize(("scale", "dtype"), [(1.0, torch.float32), (7.0, torch.float32), (1.0, torch.float16)])
def test_one_draw_per_row_has_the_distribution_of_torch_multinomial(scale: float, dtype: torch.dtype) -> None:
    """Normalised or not, float32 or float16 (as a model's softmax hands them over): each token as often as its
    probability says, as often as torch.multinomial draws it, and a zero-probability token never."""
    probs = _rows(WEIGHTS, scale, dtype)
    ours = inverse_cdf_sample(probs, generator=torch.Generator().manual_seed(0))
    theirs = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(0))
    assert ours.shape == theirs.shape == (DRAWS, 1) and ours.dtype == theirs.dtype == torch.int64
    expected = torch.tensor(WEIGHTS, dtype=torch.float64) / sum(WEIGHTS) * DRAWS
    mine, reference = _counts(ours), _counts(theirs)
    assert mine[expected == 0].sum() == 0 and reference[expected == 0].sum() == 0
    assert _chi2(mine, expected) < CHI2_DF4_P001 and _chi2(reference, expected) < CHI2_DF4_P001
    pooled = (mine + reference) / 2  # the two samples against each other: a homogeneity test, 4 df
    assert _chi2(mine, pooled) + _chi2(reference, pooled) < CHI2_DF4_P001


def test_a_distribution_off_by_one_token_fails_the_check() -> None:
    """The statistic above can fail: the same draws read one token to the right are far off."""
    probs = _rows(WEIGHTS)
    shifted = inverse_cdf_sample(probs, generator=torch.Generator().manual_seed(0)).add(1).clamp(max=len(WEIGHTS) - 1)
    expected = torch.tensor(WEIGHTS, dtype=torch.float64) / sum(WEIGHTS) * DRAWS
    assert _chi2(_counts(shifted), expected) > 100 * CHI2_DF4_P001


def test_each_row_is_drawn_from_its_own_distribution() -> None:
    rows = torch.eye(6)[torch.tensor([3, 0, 5, 5, 1])]  # one certain token per row
    assert inverse_cdf_sample(rows).flatten().tolist() == [3, 0, 5, 5, 1]
    spiky = torch.zeros(1000, 50)
    spiky[:, 49] = 1e-30  # a tiny but non-zero last token
    spiky[:500, 7] = 1.0
    drawn = inverse_cdf_sample(spiky).flatten()
    assert (drawn[:500] == 7).all() and (drawn[500:] == 49).all()


def test_the_generator_decides_the_draws() -> None:
    probs = _rows(WEIGHTS)[:200]
    first = inverse_cdf_sample(probs, generator=torch.Generator().manual_seed(5))
    again = inverse_cdf_sample(probs, generator=torch.Generator().manual_seed(5))
    other = inverse_cdf_sample(probs, generator=torch.Generator().manual_seed(6))
    assert torch.equal(first, again) and not torch.equal(first, other)
    torch.manual_seed(11)
    before = torch.get_rng_state()
    inverse_cdf_sample(probs, generator=torch.Generator().manual_seed(5))
    assert torch.equal(torch.get_rng_state(), before)  # a given generator leaves the global one alone


def test_one_generator_per_row_draws_each_row_as_it_would_alone() -> None:
    """A batch of requests, each with its seed: row i's draws are those of its own generator, call after call,
    whatever the other rows hold or draw."""
    seeds = [4, 9, 4, 1]
    probs = torch.stack([torch.tensor(WEIGHTS), torch.ones(8), torch.tensor(WEIGHTS), torch.tensor(WEIGHTS[::-1])])
    rows = [torch.Generator().manual_seed(seed) for seed in seeds]
    alone = [torch.Generator().manual_seed(seed) for seed in seeds]
    for _ in range(20):
        batched = inverse_cdf_sample(probs, generator=rows).flatten().tolist()
        assert batched == [int(inverse_cdf_sample(p[None], generator=g)) for p, g in zip(probs, alone, strict=True)]
    with fast_cpu_sampling(generators=rows):
        assert torch.multinomial(probs, num_samples=1).flatten().tolist() == [
            int(inverse_cdf_sample(p[None], generator=g)) for p, g in zip(probs, alone, strict=True)
        ]
    with pytest.raises(ValueError, match="3 generators for 4 rows"):
        inverse_cdf_sample(probs, generator=rows[:3])


@pytest.mark.parametrize(
    ("probs", "num_samples", "kwargs"),
    [
        (torch.tensor([[0.2, 0.3, 0.5, 0.0]] * 4), 3, {}),  # several draws: torch's own (no replacement)
        (torch.tensor([[0.2, 0.3, 0.5]] * 4), 5, {"replacement": True}),
        (torch.tensor([0.2, 0.3, 0.5]), 1, {}),  # a single distribution, not a batch
    ],
)
def test_other_calls_go_to_torch_multinomial(probs: torch.Tensor, num_samples: int, kwargs: dict) -> None:
    ours = inverse_cdf_sample(
        probs, num_samples, generator=torch.Generator().manual_seed(3), _multinomial=torch.multinomial, **kwargs
    )
    theirs = torch.multinomial(probs, num_samples, generator=torch.Generator().manual_seed(3), **kwargs)
    assert torch.equal(ours, theirs)
    if num_samples == 3:  # without replacement: the three possible tokens, each once
        assert sorted(ours[0].tolist()) == [0, 1, 2]
    out = torch.empty(4, 1, dtype=torch.int64)
    inverse_cdf_sample(torch.tensor([[0.0, 1.0]] * 4), 1, out=out, _multinomial=torch.multinomial)
    assert out.flatten().tolist() == [1, 1, 1, 1]  # `out=` is torch's too


@pytest.fixture
def two_threads():  # type: ignore[no-untyped-def]
    """Two intra-op threads for the test (so setting one is seen), the process's count restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.mark.usefixtures("two_threads")
def test_fast_cpu_sampling_patches_inside_the_block_only() -> None:
    original = torch.multinomial
    probs = _rows(WEIGHTS)[:300]
    with fast_cpu_sampling():
        assert torch.multinomial is not original and torch.get_num_threads() == 1
        inside = torch.multinomial(probs, num_samples=1, generator=torch.Generator().manual_seed(9))
        several = torch.multinomial(probs, 2, generator=torch.Generator().manual_seed(9))
    assert torch.multinomial is original and torch.get_num_threads() == 2
    assert torch.equal(inside, inverse_cdf_sample(probs, generator=torch.Generator().manual_seed(9)))
    assert torch.equal(several, torch.multinomial(probs, 2, generator=torch.Generator().manual_seed(9)))
    with fast_cpu_sampling(threads=None):
        assert torch.get_num_threads() == 2 and torch.multinomial is not original
    assert torch.multinomial is original


@pytest.mark.usefixtures("two_threads")
def test_fast_cpu_sampling_restores_torch_after_an_error() -> None:
    original = torch.multinomial
    with pytest.raises(RuntimeError, match="generation failed"), fast_cpu_sampling(threads=1):
        raise RuntimeError("generation failed")
    assert torch.multinomial is original and torch.get_num_threads() == 2


def test_auto_precision_is_bfloat16_exactly_where_onednn_has_bf16_kernels() -> None:
    native = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    assert cpu_precision() == ("bfloat16" if native else "float32")
    assert cpu_precision("float32") == "float32" and cpu_precision("bfloat16") == "bfloat16"
    with pytest.raises(ValueError, match="precision 'float16' is not one of auto, float32, bfloat16"):
        cpu_precision("float16")


def test_bfloat16_autocast_multiplies_in_bf16_and_leaves_the_weights_float32() -> None:
    weight = torch.nn.Parameter(torch.randn(8, 8))
    x = torch.randn(4, 8)
    with autocast("bfloat16"):
        product = x @ weight
    with autocast("float32"):
        exact = x @ weight
    assert product.dtype == torch.bfloat16 and exact.dtype == torch.float32
    product.float().sum().backward()
    assert weight.dtype == weight.grad.dtype == torch.float32
    torch.testing.assert_close(product.float(), exact, rtol=0.02, atol=0.05)  # bf16 keeps 8 bits of mantissa
