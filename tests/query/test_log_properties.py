"""Property tests of the query log reader: a write cut anywhere loses only the cut row."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrcstats.query.log import compact, dumps_row, load_log

_rows = st.lists(st.fixed_dictionaries({
    "model": st.sampled_from(["m1", "m2"]), "item": st.text(min_size=1, max_size=8),
    "trial": st.integers(0, 3), "condition": st.sampled_from(["", "a"]),
    "response": st.one_of(st.none(), st.text(max_size=30)), "status": st.sampled_from(["ok", "failed"])}),
    min_size=1, max_size=12)


@given(_rows, st.data())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_torn_tail_is_cut_and_complete_rows_kept(tmp_path_factory, rows, data):
    path = tmp_path_factory.mktemp("log") / "log.jsonl"
    lines = [dumps_row(r) + "\n" for r in rows]
    last = lines[-1].encode()
    cut = data.draw(st.integers(0, len(last) - 1), label="bytes of the last line kept")
    path.write_bytes("".join(lines[:-1]).encode() + last[:cut])
    state = load_log(path)
    kept = rows[:-1] if cut < len(last) - 1 else rows  # cutting only the newline keeps the row
    assert state.rows == [json.loads(line) for line in (dumps_row(r) for r in kept)]
    raw = path.read_bytes()
    assert raw == b"" or raw.endswith(b"\n")
    assert load_log(path).rows == state.rows  # idempotent


@given(_rows)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_compact_keeps_last_row_at_first_position(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("log") / "log.jsonl"
    n = compact(path, rows)
    out = load_log(path).rows
    keys = [(r["model"], r["item"], r["condition"], r["trial"]) for r in rows]
    first_order = list(dict.fromkeys(keys))
    assert n == len(out) == len(first_order)
    last = {k: r for k, r in zip(keys, rows, strict=True)}
    assert out == [json.loads(dumps_row(last[k])) for k in first_order]
