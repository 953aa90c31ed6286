from __future__ import annotations

import pytest

from orchestrator.dsl import format_key_path, parse_jsonc, parse_yaml
from orchestrator.errors import ConfigError

TEXT = """// leading comment
{
  "a": 1, /* inline */ "b": [10,
     {"c": "x // not a comment"},
  ],
  "d": {"e": true, "f": null, "g": -1.5e2,},
  "s": "quote \\" and \\u00e9",
}
"""


def test_comments_trailing_commas_and_values() -> None:
    doc = parse_jsonc(TEXT, file="x.yao")
    assert doc.value == {
        "a": 1,
        "b": [10, {"c": "x // not a comment"}],
        "d": {"e": True, "f": None, "g": -150.0},
        "s": 'quote " and é',
    }


def test_line_index_points_at_keys_and_elements() -> None:
    doc = parse_jsonc(TEXT, file="x.yao")
    assert doc.lines[("a",)] == 3
    assert doc.lines[("b", 0)] == 3
    assert doc.lines[("b", 1)] == 4
    assert doc.lines[("b", 1, "c")] == 4
    assert doc.lines[("d", "g")] == 6
    assert doc.line_for(("d", "missing", "deeper")) == 6


@pytest.mark.parametrize(
    ("text", "line", "col", "fragment"),
    [
        ('{\n  "a": 1\n  "b": 2\n}', 3, 3, "expected ',' or '}'"),
        ('{"a": [1, 2}', 1, 12, "expected ',' or ']'"),
        ("{'a': 1}", 1, 2, "expected a quoted key"),
        ('{"a": tru}', 1, 7, "expected a value"),
        ('{"a": 1} x', 1, 10, "after the top-level value"),
        ('{"a": "open\n}', 1, 7, "unterminated string"),
        ("/* never closed", 1, 1, "unterminated /* comment"),
        ("", 1, 1, "empty"),
        ('{\n"a": 1,\n"a": 2}', 3, 1, "duplicate key 'a'"),
        ('{"a": [1,,2]}', 1, 10, "expected a value"),
    ],
)
def test_syntax_errors_name_file_line_and_column(text: str, line: int, col: int, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_jsonc(text, file="assistants/a/package.yao")
    err = info.value
    assert err.line == line
    assert str(err).startswith(f"assistants/a/package.yao:{line}: invalid JSONC:")
    assert fragment in str(err)
    assert f"(column {col})" in str(err)


def test_yaml_document_lines_and_errors() -> None:
    doc = parse_yaml("a:\n  - x: 1\n  - x: 2\nb: 3\n", file="agent.yml")
    assert doc.value == {"a": [{"x": 1}, {"x": 2}], "b": 3}
    assert doc.lines[("a", 1, "x")] == 3
    assert doc.lines[("b",)] == 4
    with pytest.raises(ConfigError) as info:
        parse_yaml("a: [1,\nb: 2\n", file="agent.yml")
    assert str(info.value).startswith("agent.yml:")
    assert info.value.line is not None


def test_format_key_path() -> None:
    assert format_key_path(("computer", "ports", 1)) == "computer.ports[1]"
    assert format_key_path((0, "role")) == "[0].role"
    assert format_key_path(()) == ""
