"""`corral.scorers.code_tests`: a program and its tests run in the sandbox, scored."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from corral import ConfigError, TrialRecord, TrialStatus
from corral.scorers import combine, scorer
from corral.scorers._code_tests import code_tests, extract_code

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not Path("/usr/bin/bwrap").exists(), reason="needs bubblewrap"),
]

TESTS = "assert add(2, 3) == 5\n"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def trial(output: object, target: object = None) -> TrialRecord:
    return TrialRecord("add", 0, TrialStatus.COMPLETED, output=output, target=target, task="add")


def test_extract_code_takes_the_first_fenced_block() -> None:
    answer = "Here:\n```python\ndef f():\n    return 1\n```\nand\n```\nx\n```"
    assert extract_code(answer) == "def f():\n    return 1\n"
    assert extract_code("    return 1\n") == "    return 1\n"
    assert extract_code(None) == ""


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        # A shell block first: its closing fence is no opening one (it took "Then:").
        ("```bash\npip install x\n```\nThen:\n```python\nx = 1\n```\n", "x = 1\n"),
        # A reply with Windows line ends.
        ("```python\r\nx = 1\r\n```\r\n", "x = 1\r\n"),
        # A block in a list item, indented with it: its code at the top level again.
        (
            "1. The code:\n   ```python\n   def f():\n       return 1\n   ```\n",
            "def f():\n    return 1\n",
        ),
        # A body indented as the function's, fences too: its indentation kept.
        ("    ```python\n    return 1\n    ```\n", "    return 1\n"),
        # Three backticks inside the code do not end its block.
        ('```python\nfence = "```"\n```\n', 'fence = "```"\n'),
        # A reply cut off (max_tokens) before its closing fence: the code up to its end.
        ("Here:\n```python\nx = 1\n", "x = 1\n"),
        # A tilde fence, a longer fence, a language tag with more after it.
        ("~~~python\nx = 1\n~~~\n", "x = 1\n"),
        ("````py\nx = 1\n````\n", "x = 1\n"),
        ("```python title=main.py\nx = 1\n```", "x = 1\n"),
    ],
    ids=[
        "shell_first",
        "crlf",
        "in_a_list",
        "body_indented",
        "fence_in_code",
        "cut_off",
        "tilde",
        "longer",
        "title",
    ],
)
def test_extract_code_reads_fences_as_markdown_does(answer: str, code: str) -> None:
    assert extract_code(answer) == code


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        # The closing fence on the code's last line: the code up to it, not the prose
        # after it (nor the next block's code, its own fence taken as the closing one).
        ("```python\ndef f():\n    return 1```\n\nThis works.", "def f():\n    return 1\n"),
        ("```python\nx = 1```\nThen:\n```python\ny = 2\n```\n", "x = 1\n"),
        ("```bash\npip install x```\n```python\nx = 1\n```\n", "x = 1\n"),
        # The opening fence after text on its line.
        ("Sure! ```python\nx = 1\n```\nHope it helps.", "x = 1\n"),
        # Inline code in the prose opens nothing.
        ("Run ```pip install x``` first.\n```python\nx = 1\n```\n", "x = 1\n"),
        # Fences indented by a tab.
        ("\t```python\nx = 1\n\t```\n", "x = 1\n"),
        # The closing fence with prose after it on its line: it closes, the prose is
        # no code (nor is the rest of the reply, nor the next block).
        ("```python\nprint(1)\n``` That's my answer.", "print(1)\n"),
        ("```python\nx = 1\n```. Done.\n```python\ny = 2\n```\n", "x = 1\n"),
        ("```bash\npip install x\n``` Then:\n```python\nx = 1\n```\n", "x = 1\n"),
        ("~~~python\nx = 1\n~~~ (tested)\n", "x = 1\n"),
        # A fence with one word after it is another block's opening (in a docstring):
        # it closes nothing.
        (
            '```python\ndef f():\n    """E.g.\n    ```python3\n    """\n```\n',
            'def f():\n    """E.g.\n    ```python3\n    """\n',
        ),
        # A fence followed by text in a triple-quoted string is the string's (a
        # Markdown template): it closes nothing.
        (
            '```python\ndef md(code, lang):\n    return f"""\n```{lang}\n{code}\n```"""\n'
            "print(md('x', 'py'))\n```\n",
            'def md(code, lang):\n    return f"""\n```{lang}\n{code}\n```"""\n'
            "print(md('x', 'py'))\n",
        ),
        (
            "```python\nHELP = '''Usage:\n``` run it so\n'''\nprint(HELP)\n```\n",
            "HELP = '''Usage:\n``` run it so\n'''\nprint(HELP)\n",
        ),
    ],
    ids=[
        "closing_glued",
        "closing_glued_then_block",
        "shell_glued",
        "opening_glued",
        "inline",
        "tab",
        "closing_then_prose",
        "closing_then_punctuation",
        "shell_closing_then_prose",
        "tilde_closing_then_prose",
        "opening_in_code",
        "template_fence_in_string",
        "fence_then_text_in_string",
    ],
)
def test_extract_code_takes_fences_glued_to_text_as_models_write_them(
    answer: str, code: str
) -> None:
    assert extract_code(answer) == code


async def test_a_right_program_passes_and_a_wrong_one_says_why() -> None:
    scorer = code_tests(TESTS)
    right = await scorer(trial("```python\ndef add(a, b):\n    return a + b\n```"))
    assert (right.passed, right.score, right.scores) == (True, 1.0, {"tests": 1.0})
    wrong = await scorer(trial("def add(a, b):\n    return a - b\n"))
    assert (wrong.passed, wrong.score, wrong.details["reason"]) == (False, 0.0, "tests_failed")
    assert wrong.details["message"] == "the tests failed: AssertionError"
    assert wrong.details["returncode"] == 1


async def test_a_hostile_program_is_a_failed_score_with_the_sandbox_reason() -> None:
    scorer = code_tests(TESTS, timeout=0.3)  # the program never ends: any timeout shows it
    hung = await scorer(trial("import time\ntime.sleep(10**6)\n"))
    assert (hung.passed, hung.details["reason"]) == (False, "timeout")
    hog = await code_tests(TESTS)(trial("block = bytearray(10 * 1024**3)\n"))
    assert (hog.passed, hog.details["reason"]) == (False, "memory")
    assert hog.details["message"] == "ran out of memory"


async def test_program_tests_command_and_files_are_the_callers() -> None:
    scorer = code_tests(
        lambda t: f"assert add(1, 1) == {t.trial + 2}\n",
        program=lambda t: "from helper import add\n",
        files={"helper.py": "def add(a, b):\n    return a + b\n"},
        command=[sys.executable, "-B", "solution.py"],
        file_name="solution.py",
    )
    assert (await scorer(trial(None))).passed


async def test_a_command_given_as_text_is_a_line_for_the_shell() -> None:
    """`corral.sandbox` runs a string as a shell line, and code_tests checked one as
    such, then kept its letters as the command (`p`, `y`, ...): every scoring failed."""
    scorer = code_tests(command=f"{sys.executable} -B main.py && test -f main.py")
    assert scorer.command[:2] == ("/bin/sh", "-c")
    right = await scorer(trial("def add(a, b):\n    return a + b\n", target=TESTS))
    assert right.passed, right.details


def test_files_that_are_no_mapping_are_refused_by_name() -> None:
    """`files=3` was a TypeError from the check of its names against ``file_name``."""
    with pytest.raises(ConfigError, match="files must be a mapping of file name to content"):
        code_tests(files=3)  # type: ignore[arg-type]


async def test_the_tests_are_the_target_by_default() -> None:
    scorer = code_tests()
    right = await scorer(trial("def add(a, b):\n    return a + b\n", target=TESTS))
    assert right.passed
    wrong = await scorer(trial("def add(a, b):\n    return a * b\n", target=TESTS))
    assert (wrong.passed, wrong.details["reason"]) == (False, "tests_failed")


async def test_it_joins_a_combination_under_its_name() -> None:
    short = scorer(lambda t: len(str(t.output)) < 40, name="short")
    both = combine(code_tests(), short)
    assert both.name == "tests"
    right = await both(trial("def add(a, b):\n    return a + b\n", target=TESTS))
    assert (right.passed, right.scores) == (True, {"tests": 1.0, "short": 1.0})
    wrong = await both(trial("def add(a, b):\n    return a - b  # " + "x" * 40, target=TESTS))
    assert (wrong.passed, wrong.scores) == (False, {"tests": 0.0, "short": 0.0})
    assert wrong.details["tests"]["reason"] == "tests_failed"
    renamed = combine(code_tests(name="unit"), code_tests(lambda t: "assert add(0, 0) == 0\n"))
    assert (await renamed(trial("def add(a, b):\n    return a - b\n", target=TESTS))).scores == {
        "unit": 0.0,
        "tests": 1.0,
    }


async def test_without_tests_or_a_target_it_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no tests.* task 'add' .*target is None"):
        await code_tests()(trial("x = 1"))
    with pytest.raises(ConfigError, match="target is 3"):
        await code_tests()(trial("x = 1", target=3))
    with pytest.raises(ConfigError, match="scorer name"):
        code_tests(name="")
    with pytest.raises(ConfigError, match="file_name"):
        code_tests(TESTS, file_name="a/b.py")
    # The program would replace it: what the caller gave would be lost.
    with pytest.raises(ConfigError, match="files.*'main.py'.*file_name"):
        code_tests(TESTS, files={"main.py": "import helper\n", "helper.py": ""})
    with pytest.raises(ConfigError, match="files.*'./solution.py'.*file_name"):
        code_tests(TESTS, files={"./solution.py": ""}, file_name="solution.py")


#: A wrong `add` whose answer ends with its own tests: `unittest.main()` exits.
SELF_TESTED = """```python
import unittest

def add(a, b):
    return a - b

class TestAdd(unittest.TestCase):
    def test_zero(self):
        self.assertEqual(add(0, 0), 0)

if __name__ == "__main__":
    unittest.main()
```"""


@pytest.mark.parametrize(
    "answer",
    [SELF_TESTED, "def add(a, b):\n    return a - b\n\nimport sys\nsys.exit(0)\n"],
    ids=["unittest_main", "sys_exit"],
)
async def test_a_program_ending_before_its_tests_fails(answer: str) -> None:
    evaluation = await code_tests(TESTS)(trial(answer))
    assert (evaluation.passed, evaluation.details["reason"]) == (False, "tests_failed")
    assert evaluation.details["message"] == "the program ended before its tests ran"


#: A right `add` whose program silences its standard output, or closes it, for good.
SILENCING = "import os\nos.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n"
CLOSING = "import os\nos.close(1)\n"


@pytest.mark.parametrize(
    "prelude",
    [SILENCING, CLOSING, "def exec(line):\n    return line\n\n"],
    ids=["to_devnull", "closed", "naming_exec"],
)
async def test_a_program_without_its_standard_output_reaches_its_tests(prelude: str) -> None:
    """The mark saying the tests began is not lost with the standard output (nor does
    writing it fail): the tests decide."""
    right = await code_tests(TESTS)(trial(f"{prelude}def add(a, b):\n    return a + b\n"))
    assert right.passed, right.details
    wrong = await code_tests(TESTS)(trial(f"{prelude}def add(a, b):\n    return a - b\n"))
    assert wrong.details["message"] == "the tests failed: AssertionError"


#: A program whose `multiprocessing` child runs the file anew: the mark's line too.
SPAWNING = """import multiprocessing

if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=print)
    child.start()
    child.join()
"""


@pytest.mark.parametrize("program", ["x = 1\n", SPAWNING], ids=["plain", "spawning"])
async def test_the_mark_is_not_in_the_error_output_shown(program: str) -> None:
    evaluation = await code_tests("import sys\nsys.exit(3)\n")(trial(program))
    assert (evaluation.details["stderr"], evaluation.details["message"]) == (
        "",
        "the tests failed: no output",
    )


async def test_tests_of_their_own_ending_the_program_decide() -> None:
    tests = "import unittest\n\nclass T(unittest.TestCase):\n"
    tests += "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\nunittest.main()\n"
    right = await code_tests(tests)(trial("def add(a, b):\n    return a + b\n"))
    assert right.passed
    wrong = await code_tests(tests)(trial("def add(a, b):\n    return a - b\n"))
    assert (wrong.passed, wrong.details["reason"]) == (False, "tests_failed")


async def test_a_program_that_is_no_utf_8_fails_not_errs() -> None:
    """A reply holding a lone surrogate (half an emoji from a broken stream) cannot be
    written as UTF-8: Python refuses the file as it was written, a failed score."""
    evaluation = await code_tests(TESTS)(trial("def add(a, b):\n    return a + b  # \ud83d\n"))
    assert (evaluation.passed, evaluation.details["reason"]) == (False, "tests_failed")
    assert "SyntaxError" in evaluation.details["message"]


@pytest.mark.parametrize(
    ("keywords", "named"),
    [
        ({"timeout": 0}, "timeout"),
        ({"timeout": "10"}, "timeout"),
        ({"memory": -1}, "memory"),
        ({"cpu_seconds": -1}, "cpu_seconds"),
        ({"processes": 0}, "processes"),
        ({"max_output": 0}, "max_output"),
        ({"isolation": "docker"}, "isolation"),
        ({"command": []}, "command"),
        ({"files": {"../up.py": ""}}, "files"),
        ({"file_name": "main\0.py"}, "file_name"),
        ({"file_name": ".."}, "file_name"),
        ({"files": {"main.py/helper.py": ""}}, "'main.py/helper.py'.*inside the file 'main.py'"),
    ],
)
def test_bad_limits_are_refused_when_it_is_made(keywords: dict[str, object], named: str) -> None:
    """Not at the first trial's scoring, after the model was asked for every trial."""
    with pytest.raises(ConfigError, match=named):
        code_tests(TESTS, **keywords)  # type: ignore[arg-type]


#: Wrong programs that pass their tests when the two share a process: an answer equal
#: to anything, an exit status forced at exit, a failure's report replaced.
CHEATING = {
    "equal_to_anything": (
        "class Anything(int):\n"
        "    def __eq__(self, other):\n"
        "        return True\n\n"
        "def add(a, b):\n"
        "    return Anything()\n"
    ),
    "exit_forced_at_exit": (
        "import atexit, os\natexit.register(os._exit, 0)\n\ndef add(a, b):\n    return a - b\n"
    ),
    "failure_unreported": (
        "import os, sys\nsys.excepthook = lambda *a: os._exit(0)\n\n"
        "def add(a, b):\n    return a - b\n"
    ),
}


@pytest.mark.parametrize("kind", sorted(CHEATING))
async def test_an_entry_point_runs_the_tests_apart_from_the_program(kind: str) -> None:
    """With ``entry_point``, the tests call the program's function from a process of
    their own: what the program does to its own process cannot pass them."""
    assert (await code_tests(TESTS)(trial(CHEATING[kind]))).passed  # one process: cheated
    scorer = code_tests(TESTS, entry_point="add")
    cheat = await scorer(trial(CHEATING[kind]))
    assert (cheat.passed, cheat.details["reason"]) == (False, "tests_failed"), cheat.details
    right = await scorer(trial("def add(a, b):\n    return a + b\n"))
    assert right.passed, right.details
    raising = await scorer(trial("def add(a, b):\n    raise ValueError('no sum')\n"))
    assert raising.details["message"] == "the tests failed: ValueError: no sum"
    absent = await scorer(trial("def plus(a, b):\n    return a + b\n"))
    assert absent.details["message"] == "the tests failed: KeyError: 'add'"


def test_an_entry_point_is_a_name_and_takes_no_command() -> None:
    shown = "code_tests(name='tests', entry_point='add')"
    assert repr(code_tests(TESTS, entry_point="add")) == shown
    with pytest.raises(ConfigError, match=r"entry_point must be the name .*not 'add\(\)'"):
        code_tests(TESTS, entry_point="add()")
    with pytest.raises(ConfigError, match=r"entry_point runs the tests .*give no command"):
        code_tests(TESTS, entry_point="add", command="node main.js")
    with pytest.raises(ConfigError, match=r"hidden paths need isolation='bubblewrap'"):
        code_tests(TESTS, hidden=["/usr"], isolation="none")  # refused as it is made


async def test_tests_apart_pass_only_plain_arguments() -> None:
    scorer = code_tests("assert add(lambda: 1, 2) == 3\n", entry_point="add")
    evaluation = await scorer(trial("def add(a, b):\n    return a() + b\n"))
    assert evaluation.details["message"] == (
        "the tests failed: TypeError: a call's arguments holds an object of type 'function', "
        "not a plain value (a number, text, None, bytes, or a list, tuple, dict or set of them)"
    )


#: Wrong programs that reach into the tests' process from their own: one rewrites a
#: constant of the harness in its memory (``os._exit(1)`` becomes ``os._exit(0)``), one
#: plants a module the tests' process imports as a failure is reported.
REACHING = {
    "memory": (
        "import os, sys\n"
        "run = sys.modules['__main__'].run\n"
        "consts = run.__code__.co_consts\n"
        "found = [i for i, c in enumerate(consts) if type(c) is int and c == 1]\n"
        "with open(f'/proc/{os.getppid()}/mem', 'r+b', buffering=0) as m:\n"
        "    for i in found:\n"
        "        m.seek(id(consts) + 24 + 8 * i)\n"
        "        m.write(id(0).to_bytes(8, 'little'))\n\n"
        "def add(a, b):\n    return a - b\n"
    ),
    "planted_module": (
        "import os, sys\n"
        "folder = os.path.dirname(os.path.abspath(sys.modules['__main__'].__file__))\n"
        "with open(os.path.join(folder, 'ast.py'), 'w') as f:\n"
        "    f.write('import os\\nos._exit(0)\\n')\n\n"
        "def add(a, b):\n    return a - b\n"
    ),
}


#: Right answers of builtin types' subclasses, which compare as their base types do.
SUBCLASSED = (
    "from collections import Counter, OrderedDict, defaultdict, namedtuple\n"
    "Pair = namedtuple('Pair', 'a b')\n\n"
    "def add(a, b):\n"
    "    if a == 'counts':\n"
    "        return Counter(b)\n"
    "    if a == 'ordered':\n"
    "        return OrderedDict(b)\n"
    "    if a == 'default':\n"
    "        found = defaultdict(list)\n"
    "        found['x'].append(b)\n"
    "        return found\n"
    "    if a == 'pair':\n"
    "        return Pair(*b)\n"
    "    return a + b\n"
)
SUBCLASS_TESTS = (
    "assert add('counts', 'aab') == {'a': 2, 'b': 1}\n"
    "assert add('ordered', [(1, 2)]) == {1: 2}\n"
    "assert add('default', 3) == {'x': [3]}\n"
    "assert add('pair', [1, 2]) == (1, 2)\n"
    "assert add(10**5000, 1) == 10**5000 + 1\n"
)


async def test_tests_apart_take_subclasses_of_plain_types_as_their_base_types() -> None:
    """A Counter, an OrderedDict, a defaultdict or a namedtuple comes back as the dict or
    tuple it is (read by the base type's own methods, never the subclass's); a whole
    number of any size crosses either way."""
    scorer = code_tests(SUBCLASS_TESTS, entry_point="add")
    evaluation = await scorer(trial(SUBCLASSED))
    assert evaluation.passed, evaluation.details
    lying = "class Anything(dict):\n    def __eq__(self, other):\n        return True\n\n"
    lying += "def add(a, b):\n    return Anything()\n"
    assert not (await scorer(trial(lying))).passed


async def test_tests_apart_catch_an_exception_as_its_builtin_base() -> None:
    tests = "try:\n    add([], 0)\nexcept ValueError as exc:\n    assert 'data point' in str(exc)\n"
    tests += "else:\n    raise AssertionError('no error')\n"
    program = "import statistics\n\ndef add(a, b):\n    return statistics.mean(a)\n"
    evaluation = await code_tests(tests, entry_point="add")(trial(program))
    assert evaluation.passed, evaluation.details


#: Right answers that are no plain values, and tests that take them as the one process
#: would: an iterator (a generator, a map) through `tuple` or `list`, a range, a dict's
#: view, an exact fraction or decimal; and an iterator compared as itself, which fails.
FAITHFUL = (
    (
        "def add(a, b):\n    return (x + b for x in a)\n",
        "assert tuple(add([1, 2], 1)) == (2, 3)\nassert add([1], 1) != [2]\n",
    ),
    ("def add(a, b):\n    return map(str, a)\n", "assert list(add([1, 2], 0)) == ['1', '2']\n"),
    (
        "def add(a, b):\n    return range(a, b)\n",
        "r = add(1, 4)\nassert len(r) == 3 and r[-1] == 3\n",
    ),
    ("def add(a, b):\n    return {a: 1, b: 2}.keys()\n", "assert add('x', 'y') == {'y', 'x'}\n"),
    (
        "from fractions import Fraction\n\ndef add(a, b):\n    return Fraction(a, 3) + b\n",
        "assert add(1, 0) != 1 / 3 and add(3, 1) == 2\n",
    ),
    (
        "from decimal import Decimal\n\ndef add(a, b):\n    return Decimal(a) + Decimal(b)\n",
        "assert str(add('0.1', '0.2')) == '0.3'\n",
    ),
)


#: Right programs a process of their own must run as `python main.py` would: their
#: annotations their own (no `from __future__` of the harness), an argument parser at
#: their top, an answer nested deep, a NumPy array the tests read as one.
AS_ITS_OWN = (
    (
        "def add(a: int, b: int) -> int:\n"
        "    return a + b if add.__annotations__['a'] is int else 0\n",
        TESTS,
    ),
    (
        "import argparse\nargparse.ArgumentParser().parse_args()\n\n" + "def add(a, b):\n"
        "    return a + b\n",
        TESTS,
    ),
    (
        "def add(a, b):\n    deep = a + b\n    for _ in range(900):\n        deep = [deep]\n"
        "    return deep\n",
        "x = add(2, 3)\nfor _ in range(900):\n    x = x[0]\nassert x == 5\n",
    ),
)


#: Values of built-in types besides the plain ones, as arguments and answers.
OTHER_BUILTINS = (
    ("def add(a, b):\n    return a + b\n", "assert add(1j, 1) == 1 + 1j\n"),
    ("def add(a, b):\n    return a + b\n", "assert add(bytearray(b'a'), b'b') == b'ab'\n"),
)


@pytest.mark.parametrize(("program", "tests"), FAITHFUL + AS_ITS_OWN + OTHER_BUILTINS)
async def test_tests_apart_see_an_answer_as_the_one_process_would(program: str, tests: str) -> None:
    evaluation = await code_tests(tests, entry_point="add")(trial(program))
    assert evaluation.passed, evaluation.details


@pytest.mark.parametrize(
    ("answer", "tests"),
    [
        ("np.sum([a, b])", TESTS),
        (
            "np.array([a, b])",
            "r = add(2, 3)\nassert list(r) == [2, 3] and r.dtype.kind == 'i' and r.shape == (2,)\n",
        ),
    ],
)
async def test_tests_apart_take_numpy_values_as_themselves(answer: str, tests: str) -> None:
    pytest.importorskip("numpy")
    program = f"import numpy as np\n\ndef add(a, b):\n    return {answer}\n"
    evaluation = await code_tests(tests, entry_point="add")(trial(program))
    assert evaluation.passed, evaluation.details


async def test_tests_apart_catch_an_exception_whose_class_takes_more_arguments() -> None:
    tests = "try:\n    add(b'\\xff', 0)\nexcept ValueError:\n    pass\n"
    tests += "else:\n    raise AssertionError('no error')\n"
    program = "def add(a, b):\n    return a.decode('utf-8')\n"  # UnicodeDecodeError
    evaluation = await code_tests(tests, entry_point="add")(trial(program))
    assert evaluation.passed, evaluation.details


#: Wrong programs that read the tests to answer them: from the file they run from, and
#: from the memory their process was forked with (the harness's frame holding them).
ORACLES = {
    "from_the_file": (
        "import ast, sys\n"
        "text = open(sys.modules['__main__'].__file__).read()\n"
        "calls = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Constant)\n"
        "         and isinstance(n.value, str) and 'assert add(' in n.value]\n"
        "tests = calls[-1].value if calls else ''\n"
    ),
    "from_memory": (
        "import sys\n"
        "frame, tests = sys._getframe(), ''\n"
        "while frame is not None:\n"
        "    if 'tests' in frame.f_locals and isinstance(frame.f_locals['tests'], str):\n"
        "        tests = frame.f_locals['tests']\n"
        "    frame = frame.f_back\n"
    ),
}
ANSWERING = (
    "import ast\n"
    "table = {}\n"
    "for node in ast.walk(ast.parse(tests)):\n"
    "    if isinstance(node, ast.Compare) and isinstance(node.left, ast.Call):\n"
    "        args = [ast.literal_eval(a) for a in node.left.args]\n"
    "        table[repr(args)] = ast.literal_eval(node.comparators[0])\n\n"
    "def add(*args):\n"
    "    return table[repr(list(args))]\n"
)


#: Every way in of the two kinds: reaching into the tests' process, reading the tests.
INTRUDING = {**REACHING, **{kind: text + ANSWERING for kind, text in ORACLES.items()}}


@pytest.mark.parametrize("kind", sorted(INTRUDING))
async def test_a_program_apart_cannot_reach_the_tests_or_their_process(kind: str) -> None:
    """The tests' process cannot be read or written through /proc (it is not dumpable)
    and imports nothing from the work folder the program may write to; the tests reach
    it on its standard input, after the program's process has started afresh (not
    forked with them): neither its file nor its memory holds them."""
    scorer = code_tests(TESTS + "assert add(-1, 1) == 0\n", entry_point="add")
    evaluation = await scorer(trial(INTRUDING[kind]))
    assert (evaluation.passed, evaluation.details["reason"]) == (False, "tests_failed"), (
        evaluation.details
    )


async def test_an_entry_point_and_a_prelude_may_be_the_trials() -> None:
    """A dataset may name each task's function, and give code its tests call (as
    HumanEval's prompt defines ``poly`` for its tests)."""
    scorer = code_tests(
        "assert add(2, 3) == twice(2) + 1\n",
        entry_point=lambda t: t.task,
        prelude=lambda t: "def twice(x):\n    return 2 * x\n",
    )
    right = await scorer(trial("def add(a, b):\n    return a + b\n"))
    assert right.passed, right.details
    unnamed = code_tests(TESTS, entry_point=lambda t: "add me")
    with pytest.raises(ConfigError, match=r"task 'add' entry point is the name .*'add me'"):
        await unnamed(trial("def add(a, b):\n    return a + b\n"))
    with pytest.raises(ConfigError, match="prelude runs before tests apart .*give entry_point"):
        code_tests(TESTS, prelude="x = 1\n")
