"""Named settings of issue 11 and unequal domain groups: sizes, true domains, label sets, seeds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from demo.data import DOMAINS
from demo.partition import (
    SETTINGS,
    Domain,
    Setting,
    group_sizes,
    multi_domain_partition,
    setting_partition,
)


def _stand_in(name: str, seed: int) -> Domain:
    """A domain with the real class names and 120 images per class; pixels encode the row."""
    classes = DOMAINS[name].class_names
    n = 120 * len(classes)
    rows = np.arange(n)
    images = np.zeros((n, 4, 4), dtype=np.uint8)
    images[:, 0, 0], images[:, 0, 1] = rows % 256, rows // 256
    images[:, 1, 0] = seed
    return Domain(name, images, (rows % len(classes)).astype(np.int64), classes)


def _labels(setting: Setting, p: int) -> set[str]:
    part = setting.parts[p]
    return {part.domain.classnames[int(y)] for y in part.domain.labels[part.indices]}


@pytest.mark.parametrize(
    ("n", "shares", "sizes"),
    [
        (10, (7, 3), (7, 3)),
        (6, (7, 3), (4, 2)),
        (3, (7, 3), (2, 1)),
        (20, (7, 3), (14, 6)),
        (10, (1, 1, 1), (4, 3, 3)),
        (9, (1, 1, 1), (3, 3, 3)),
        (8, (1, 1), (4, 4)),
    ],
)
def test_group_sizes_known_answers(n: int, shares: tuple[int, ...], sizes: tuple[int, ...]) -> None:
    assert group_sizes(n, shares) == sizes


@given(n=st.integers(3, 60), shares=st.lists(st.integers(1, 9), min_size=1, max_size=3))
# more examples than the profile (cheap): quotas near the refusal edge are rare draws
@settings(max_examples=200)
def test_group_sizes_sum_to_n_and_stay_within_one_of_the_quota(n: int, shares: list[int]) -> None:
    assume(all(n * s >= sum(shares) for s in shares))  # every quota >= 1: never refused
    sizes = group_sizes(n, shares)
    assert sum(sizes) == n
    assert min(sizes) >= 1
    for size, share in zip(sizes, shares, strict=True):
        assert abs(size - n * share / sum(shares)) < 1


def test_group_sizes_refuse_bad_arguments() -> None:
    with pytest.raises(ValueError, match="Argument 'n' must be >= 2"):
        group_sizes(1, (7, 3))
    with pytest.raises(ValueError, match="Argument 'shares'"):
        group_sizes(10, (7, 0))
    with pytest.raises(ValueError, match="large enough"):
        group_sizes(4, (9, 1, 1))  # quotas 3.27, 0.36, 0.36: sizes (3, 1, 0)


def test_unequal_groups_are_consecutive_and_cover_each_domain() -> None:
    hand, letters = _stand_in("handwritten_digits", 0), _stand_in("printed_letters", 0)
    parts = multi_domain_partition([hand, letters], 10, seed=1, sizes=(7, 3))
    assert [p.participant for p in parts] == list(range(10))
    assert [p.domain.name for p in parts] == ["handwritten_digits"] * 7 + ["printed_letters"] * 3
    for domain, group in ((hand, parts[:7]), (letters, parts[7:])):
        joined = np.sort(np.concatenate([p.indices for p in group]))
        assert np.array_equal(joined, np.arange(len(domain.labels)))
    # equal groups keep their old seeds, so earlier runs replay
    equal = multi_domain_partition([hand, letters], 10, seed=1)
    explicit = multi_domain_partition([hand, letters], 10, seed=1, sizes=(5, 5))
    assert all(np.array_equal(a.indices, b.indices) for a, b in zip(equal, explicit, strict=True))


@pytest.mark.parametrize("sizes", [(7, 2), (10, 0), (4, 3, 3)])
def test_unequal_groups_refuse_sizes_that_do_not_fit(sizes: tuple[int, ...]) -> None:
    hand, letters = _stand_in("handwritten_digits", 0), _stand_in("printed_letters", 0)
    with pytest.raises(ValueError, match="Argument 'sizes' must hold 2 positive group sizes"):
        multi_domain_partition([hand, letters], 10, sizes=sizes)


@pytest.mark.parametrize(
    ("name", "n", "sizes"),
    [
        ("single", 10, (10,)),
        ("two-domain", 10, (5, 5)),
        ("three-domain", 9, (3, 3, 3)),
        ("unequal", 10, (7, 3)),
        ("unequal", 20, (14, 6)),
    ],
)
def test_settings_give_each_group_its_own_label_set(
    name: str, n: int, sizes: tuple[int, ...]
) -> None:
    setting = setting_partition(name, n, alpha=0.5, seed=3, load=_stand_in)
    assert setting.group_sizes == sizes
    assert setting.domain_names == SETTINGS[name].domains
    assert setting.true_domain == tuple(d for d, k in enumerate(sizes) for _ in range(k))
    assert [p.participant for p in setting.parts] == list(range(n))
    for p, d in enumerate(setting.true_domain):
        domain = setting.domain_names[d]
        assert setting.parts[p].domain.name == domain
        assert _labels(setting, p) <= set(DOMAINS[domain].class_names)
    assert setting.prompt_templates == tuple(
        DOMAINS[d].prompt_template for d in setting.domain_names
    )
    # domains share no class name: a participant's labels say which group it is in
    names = [set(DOMAINS[d].class_names) for d in setting.domain_names]
    assert all(not a & b for i, a in enumerate(names) for b in names[i + 1 :])


def test_images_per_participant_cuts_each_domain_to_its_group() -> None:
    setting = setting_partition(
        "unequal", 10, alpha=100.0, seed=0, images_per_participant=60, load=_stand_in
    )
    totals = [0, 0]
    for part, d in zip(setting.parts, setting.true_domain, strict=True):
        totals[d] += len(part.indices)
        assert 40 <= len(part.indices) <= 80  # alpha=100: nearly even parts
    assert totals == [7 * 60, 3 * 60]
    with pytest.raises(ValueError, match="Argument 'images_per_participant'"):
        setting_partition("two-domain", 4, images_per_participant=5, load=_stand_in)


def test_settings_are_a_pure_function_of_the_seed() -> None:
    def build(seed: int) -> Setting:
        return setting_partition(
            "three-domain", 6, seed=seed, images_per_participant=100, load=_stand_in
        )

    first, again, other = build(7), build(7), build(8)
    assert first.true_domain == again.true_domain == other.true_domain
    for a, b in zip(first.parts, again.parts, strict=True):
        assert np.array_equal(a.indices, b.indices)
        assert np.array_equal(a.domain.images, b.domain.images)
    assert any(
        not np.array_equal(a.indices, b.indices)
        for a, b in zip(first.parts, other.parts, strict=True)
    )


def test_unknown_setting_is_named() -> None:
    with pytest.raises(ValueError, match=r"Argument 'name' must be one of \['single', "):
        setting_partition("four-domain", 8, load=_stand_in)


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
@pytest.mark.usefixtures("fashion_mnist")
def test_three_domain_setting_on_the_real_domains() -> None:
    """The real loaders: digits, letters and clothing, each participant over its own classes."""
    setting = setting_partition("three-domain", 6, alpha=0.5, seed=0, images_per_participant=80)
    assert setting.domain_names == ("handwritten_digits", "printed_letters", "fashion")
    assert setting.true_domain == (0, 0, 1, 1, 2, 2)
    for p, d in enumerate(setting.true_domain):
        part = setting.parts[p]
        assert part.domain.images.shape[1:] == (32, 32, 3)
        assert _labels(setting, p) <= set(DOMAINS[setting.domain_names[d]].class_names)
        assert set(part.class_counts()) == _labels(setting, p)
    assert sum(len(p.indices) for p in setting.parts) == 6 * 80
