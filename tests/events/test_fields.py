"""router/events/fields.py: the field tree a rule's paths are checked against."""

from __future__ import annotations

from router.events.catalog import EVENT_TYPES
from router.events.fields import ANY, check_path, event_tree, scope_tree


def test_the_union_of_two_events_has_the_fields_of_both() -> None:
    tree = event_tree(["tool_call", "input"])
    assert set(event_tree(["tool_call"])) | set(event_tree(["input"])) == set(tree)
    assert check_path(tree, ("tool", "name")) is None
    assert check_path(tree, ("no_such_field",)) is not None


def test_a_tree_given_out_can_be_changed_without_changing_the_next_one() -> None:
    """The union is merged once per list of event types: each caller still gets its own top level."""
    first = event_tree(EVENT_TYPES)
    first["added"] = ANY
    first.pop(next(iter(sorted(k for k in first if k != "added"))))
    again = event_tree(EVENT_TYPES)
    assert "added" not in again
    assert set(again) == set(event_tree(list(EVENT_TYPES)))
    assert len(again) == len(first)


def test_the_scope_adds_vars_signals_and_state_to_the_event_fields() -> None:
    tree = scope_tree(["input"], var_names=["v"], signal_names=["s"])
    assert tree["vars"] == {"v": ANY} and tree["signals"] == {"s": ANY}
    assert tree["signal_errors"] == {"s": None}
    assert "vars" not in event_tree(["input"])
