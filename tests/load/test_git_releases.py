"""router.load.git_releases: which tags are releases, and which is the newest (version order)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from router.load.git_releases import looks_like_commit, newest, version

numbers = st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=6)


@given(numbers, st.sampled_from(["", "v", "V"]))
def test_a_dotted_version_parses_to_its_numbers_without_trailing_zeros(parts: list[int], prefix: str) -> None:
    parsed = version(prefix + ".".join(map(str, parts)))
    expected = list(parts)
    while len(expected) > 1 and expected[-1] == 0:
        expected.pop()
    assert parsed == tuple(expected)


@given(st.text(max_size=30))
def test_any_tag_parses_or_is_not_a_release_and_never_raises(tag: str) -> None:
    parsed = version(tag)
    assert parsed is None or all(isinstance(p, int) for p in parsed)


@given(st.lists(numbers, min_size=1, max_size=8))
def test_newest_is_the_highest_version_whatever_the_order(versions: list[list[int]]) -> None:
    tags = [f"v{'.'.join(map(str, v))}" for v in versions]
    chosen = newest([*tags, "latest", "stable", "v9-rc1"])
    assert chosen is not None
    assert version(chosen) == max(version(t) or () for t in tags)


def test_version_order_is_numeric_and_other_tags_are_never_releases() -> None:
    assert newest(["v2", "v10", "v9", "v3.1"]) == "v10"
    assert newest(["v1.2", "v1.10", "v1.9.9"]) == "v1.10"
    assert newest(["latest", "v2-rc1", "release-3", "v", "2.x"]) is None
    assert version("v1.0") == version("v1") == (1,)


def test_a_commit_id_is_7_to_40_hex_digits() -> None:
    assert looks_like_commit("a1b2c3d") and looks_like_commit("0" * 40)
    assert not looks_like_commit("v1") and not looks_like_commit("abc") and not looks_like_commit(None)
    assert not looks_like_commit("A1B2C3D4")
