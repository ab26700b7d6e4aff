"""A stored configuration's task list read a piece at a time (`task_list_of_pieces`)
equals the one its whole text decodes to, wherever the pieces are cut, and is None
(the caller then decodes the whole text, which says what is wrong) where the text is
not as Corral writes it."""

from __future__ import annotations

import json

import pytest

from corral.store._heads import task_list_of_config, task_list_of_pieces, utf8_pieces

WRITTEN = [
    '{"trials_per_task":12,"tasks":{"a":{"environment_id":"e","model":"m"},'
    '"b":{"environment_id":"e","inputs":{"x":[1,2.5e3,"y\\"z}"]}}}}',
    ' { "trials_per_task" : 2 , "tasks" : { "a" : {"environment_id":"e","model":null} } ,'
    ' "other": [1, {"environment_id": 3}] }\n',
    '{"trials_per_task":1,"tasks":{}}',
    '{"trials_per_task":3,"tasks":{"t\\u00e9 \\"q\\"":{"environment_id":"\\u00e9\\n"}}}',
    '{"trials_per_task":1,"tasks":{"été":{"environment_id":"日本","model":"ü"}}}',
    # A key twice: the last, as a whole decode keeps it.
    '{"trials_per_task":1,"trials_per_task":2,"tasks":{}}',
    '{"trials_per_task":1,"tasks":{},"trials_per_task":2}',
]
NOT_AS_WRITTEN = [
    "",
    "[]",
    "{}",
    '{"trials_per_task":1,"tasks":[]}',
    '{"trials_per_task":1.0,"tasks":{}}',
    '{"trials_per_task":true,"tasks":{}}',
    '{"trials_per_task":1,"tasks":{"a":{"environment_id":NaN}}}',
    '{"trials_per_task":1,"tasks":{"a":{"environment_id":5}}}',
    '{"trials_per_task":1,"tasks":{"a":{"model":"x"}}}',
    '{"trials_per_task":1,"tasks":{"a":[1]}}',
    '{"trials_per_task":1,"tasks":{"a":{"environment_id":"e","model":{"environment_id":"x"}}}}',
    '{"trials_per_task":1,"tasks":{"a":{"environment_id":"e"}},}',
    '{"trials_per_task":1,"tasks":{"a":{"environment_id":"e"}}',
    '{"trials_per_task":1,"tasks":{"a":{"environment_id":"e"}}} x',
    '{"trials_per_task":1 "tasks":{}}',
    '{"environment_id":"x","trials_per_task":1,"tasks":{}}',
    # Valid JSON, read whole instead: a task or the tasks twice, the trials after the tasks.
    '{"trials_per_task":1,"tasks":{"a":{"environment_id":"e"},"a":{"environment_id":"f"}}}',
    '{"tasks":{"a":{"environment_id":"e"}},"trials_per_task":1}',
    '{"trials_per_task":1,"tasks":{"a":{"environment_id":"e"}},"tasks":{"b":{"environment_id":"e"}}}',
    '{"trials_per_task":1,"tasks":{"a":{"environment_id":"e"}},"tasks":3}',
]


def cut(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("text", WRITTEN)
def test_every_cut_reads_what_the_whole_text_decodes_to(text: str) -> None:
    want = task_list_of_config(json.loads(text))
    assert want is not None
    for size in range(1, len(text) + 1):
        assert task_list_of_pieces(cut(text, size)) == want, size
    data = text.encode()
    for size in range(1, len(data) + 1):  # UTF-8 cut inside a character too
        pieces = (data[i : i + size] for i in range(0, len(data), size))
        assert task_list_of_pieces(utf8_pieces(pieces)) == want, size


def test_a_number_cut_between_two_pieces_is_read_whole() -> None:
    found = task_list_of_pieces(['{"trials_per_task":1', '2,"tasks":{}}'])
    assert found is not None and found.trials_per_task == 12


@pytest.mark.parametrize("text", NOT_AS_WRITTEN)
def test_what_corral_does_not_write_is_left_to_the_whole_read(text: str) -> None:
    for size in (1, 2, 5, len(text) or 1):
        assert task_list_of_pieces(cut(text, size)) is None, size


def test_bytes_that_are_not_utf8_are_left_to_the_whole_read() -> None:
    pieces = [b'{"trials_per_task":1,"tasks":{"\xff":{"environment_id":"e"}}}']
    assert task_list_of_pieces(utf8_pieces(pieces)) is None
