"""The trusted judge of assert-style tests (rewards.code.sandbox.run_judged) and its plain-data protocol.

The codec is checked against values written out by hand; the judge against programs whose right and wrong
answers are known, and against programs that look for the tests from inside the sandbox.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import sys
import time
import tracemalloc

import pytest

from rewards.code.sandbox import run_judged
from rewards.code.sandbox.protocol import (
    MAX_INT_BITS,
    MAX_MESSAGE_BYTES,
    NotPlainData,
    decode,
    loads,
    read_request,
    request_line,
    to_json,
    to_literal,
)

# ---------------------------------------------------------------- the codec


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        (True, "true"),
        (3, "3"),
        (-2.5, "-2.5"),
        ("é\n", '"\\u00e9\\n"'),
        ((1, "a"), '["T",[1,"a"]]'),
        ([1, [2]], '["L",[1,["L",[2]]]]'),
        ({1: (2,)}, '["D",[[1,["T",[2]]]]]'),
        (b"\x00\xff", '["B","00ff"]'),
        (frozenset({1}), '["F",[1]]'),
        (1 + 2j, '["C",[1.0,2.0]]'),
        (float("inf"), '["f","inf"]'),
    ],
)
def test_values_are_written_as_tagged_json_and_read_back(value, text):
    assert to_json(value) == text
    back = decode(json.loads(text))
    assert back == value and type(back) is type(value)


def test_nan_and_sets_come_back_as_themselves():
    assert math.isnan(decode(json.loads(to_json(float("nan")))))
    assert decode(json.loads(to_json({3, 1, 2}))) == {1, 2, 3}


class Always(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


@pytest.mark.parametrize(
    "value",
    [Always(1), object(), (x for x in ()), print, type, [[]] * 0 + [Always(2)], {"k": object()}, 1 << MAX_INT_BITS],
    ids=[
        "int subclass",
        "object",
        "generator",
        "builtin function",
        "class",
        "nested subclass",
        "dict value",
        "int past the size cap",
    ],
)
def test_anything_else_is_not_plain_data(value):
    with pytest.raises(NotPlainData):
        to_json(value)
    with pytest.raises(NotPlainData):
        to_literal(value)


def round_trip(value):
    return decode(loads(('{"ok":' + to_json(value) + "}").encode())["ok"])


@pytest.mark.parametrize(
    "value",
    ["\ud83d" + "\ude00", "\U0001f600", "a\udc80b", "\ud83d", "é\n", ["\ude00\ud83d"], {"\ud800": ("\udfff",)}],
    ids=["surrogate pair", "astral", "lone low", "lone high", "bmp", "in a list", "dict key and tuple"],
)
def test_strings_cross_by_their_code_points(value):
    back = round_trip(value)
    assert back == value and repr(back) == repr(value)
    name, args, _ = read_request(request_line("f", (value,), {}))
    assert args == (value,) and repr(args[0]) == repr(value)


def test_a_surrogate_pair_is_not_the_character_it_spells():
    pair, emoji = "\ud83d" + "\ude00", "\U0001f600"
    assert round_trip(pair) != emoji and len(round_trip(pair)) == 2
    assert round_trip(emoji) != pair and len(round_trip(emoji)) == 1


@pytest.mark.parametrize(
    "value",
    [
        10**5000 + 7,
        -(10**5000),
        1 << 4096,
        -(1 << 4096) + 1,
        [10**4400, {10**4400: (-(10**4400),)}],
        1 << MAX_INT_BITS - 1,
    ],
    ids=["5000 digits", "negative", "first hex", "last decimal", "nested", "at the cap"],
)
def test_big_ints_cross_exactly_both_ways(value):
    assert round_trip(value) == value
    name, args, kwargs = read_request(request_line("f", (value,), {"k": value}))
    assert args == (value,) and kwargs == {"k": value}


def test_ints_past_the_cap_and_malformed_hex_are_refused():
    for body in ["f" * (MAX_INT_BITS // 4 + 1), "0x1f", " 1f", "1_f", "-", "", "12g", "+1", "1F", "--1", 5]:
        with pytest.raises(NotPlainData):
            decode(["I", body])
    assert decode(["I", "-ff"]) == -255


M = sys.hash_info.modulus
COLLIDING = {
    "ints in a set": ["S", [k * M for k in range(30_000)]],
    "ints as dict keys": ["D", [[k * M, 0] for k in range(30_000)]],
    "tuples of -1 and -2": ["F", [["T", list(t)] for t in itertools.product((-1, -2), repeat=14)]],
    "one value repeated": ["S", [["T", [1, 2, 3]]] * 50_000],
}


@pytest.mark.parametrize("data", COLLIDING.values(), ids=COLLIDING.keys())
def test_members_whose_hashes_collide_are_refused_in_linear_time(data):
    # Built as sent, each of these costs a set seconds to minutes: every member is compared with every
    # earlier one of its hash.
    # The bound is this thread's CPU time for the decoding alone, with room for a slow or busy CI machine:
    # linear work here is about a tenth of a second, the quadratic building it replaces takes seconds.
    parsed = loads(json.dumps({"ok": data}).encode())["ok"]
    start = time.thread_time()
    with pytest.raises(NotPlainData, match="collide"):
        decode(parsed)
    assert time.thread_time() - start < 1.5


def test_ordinary_collisions_still_decode():
    grid = {(x, y) for x in range(-60, 60) for y in range(-60, 60)}  # hash(-1) == hash(-2): pairs collide
    for value in [{-1, -2}, frozenset({(-1, 0), (-2, 0)}), {-1: "a", -2: "b"}, grid, {1, 1.5, "1", (1,)}]:
        assert round_trip(value) == value


def test_big_replies_are_refused_before_they_are_parsed():
    dense = b'{"ok":["L",[' + b",".join([b"[]"] * (MAX_MESSAGE_BYTES // 3 - 10)) + b"]]}"  # under 8 MB
    assert len(dense) < MAX_MESSAGE_BYTES
    tracemalloc.start()
    try:
        with pytest.raises(NotPlainData):
            decode(loads(dense)["ok"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20  # parsed, 2.8 million empty lists take 200 MB
    with pytest.raises(NotPlainData, match="bytes"):
        loads(b'{"ok":"' + b"x" * MAX_MESSAGE_BYTES + b'"}')
    long_text = "x" * (MAX_MESSAGE_BYTES // 2)  # one big value is fine: it costs its bytes
    assert round_trip(long_text) == long_text


def test_deep_nesting_is_refused_both_ways():
    deep = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(NotPlainData):
        to_json(deep)
    text = '["L",[' * 200 + "]]" * 200
    with pytest.raises(NotPlainData):
        decode(json.loads(text))


@pytest.mark.parametrize(
    "line",
    [b"[1]", b"not json", b'{"ok": ' + b"9" * 5000 + b"}", b"[" * 100000],
    ids=["not an object", "not json", "int past the digit limit", "nesting bomb"],
)
def test_unreadable_messages_are_refused(line):
    with pytest.raises(NotPlainData):
        loads(line)


@pytest.mark.parametrize("data", [["X", []], ["S", [["L", []]]], ["D", [[1]]], {"a": 1}, ["B", 5]])
def test_malformed_values_are_refused(data):
    with pytest.raises(NotPlainData):
        decode(data)


def test_requests_carry_arguments_as_python_literals():
    args = (1, (2.5, float("inf")), {"a": {1, 2}}, b"x", (), (0,), set(), frozenset(), complex(1, float("-inf")))
    line = request_line("f", args, {"k": frozenset({None})})
    name, back, kwargs = read_request(line)
    assert (name, back, kwargs) == ("f", args, {"k": frozenset({None})})
    assert [type(value) for value in back] == [type(value) for value in args]
    with pytest.raises(NotPlainData):
        request_line("f", (object(),), {})


# ---------------------------------------------------------------- the judge

ADD = "def add(a, b):\n    return a + b\n"


def test_mbpp_style_asserts_call_the_solution_by_name():
    result = run_judged(ADD, "", ["assert add(1, 2) == 3", "assert add(2, 2) == 5", "assert add('a', 'b') == 'ab'"])
    assert result.status == "ok"
    assert result.cases == {0: (True, ""), 1: (False, "AssertionError: "), 2: (True, "")}


def test_humaneval_style_check_with_a_helper_from_the_setup():
    setup = "def helper(x):\n    return x * 10\n\ndef check(candidate):\n    assert candidate(2, 3) == helper(0) + 5\n"
    result = run_judged(ADD, setup, ["check(add)"], ["add"])
    assert result.cases == {0: (True, "")}


def test_keyword_arguments_tuples_and_dicts_cross_intact():
    solution = "def f(x, *, scale=1):\n    return {'pair': (x, x * scale), 'set': {x}}\n"
    result = run_judged(solution, "", ["assert f(2, scale=3) == {'pair': (2, 6), 'set': {2}}"], ["f"])
    assert result.cases == {0: (True, "")}


def test_strings_and_big_ints_cross_the_wall_exactly():
    solution = (
        "def pair():\n    return '\\ud83d' + '\\ude00'\n\n"
        "def emoji():\n    return '\\U0001F600'\n\n"
        "def echo(value):\n    return value\n\n"
        "def succ(n):\n    return n + 1\n"
    )
    cases = [
        "assert pair() != '\\U0001F600' and len(pair()) == 2",  # a wrong answer stays wrong
        "assert len(emoji()) == 1",
        "assert echo('\\ud83d\\ude00') == '\\ud83d' + '\\ude00' and echo('\\udfff') == '\\udfff'",
        "assert succ(10**5000) == 10**5000 + 1",  # past 4,300 digits, both ways
        "assert succ(-(2**20000)) == 1 - 2**20000 and echo({2**20000: [10**6000]}) == {2**20000: [10**6000]}",
    ]
    result = run_judged(solution, "", cases, ["pair", "emoji", "echo", "succ"])
    assert result.cases == {index: (True, "") for index in range(len(cases))}, result.cases


def test_a_failed_call_fails_the_case_even_when_the_test_catches_it():
    solution = "def f(x):\n    raise ValueError('no')\n"
    case = "try:\n    f(1)\nexcept Exception:\n    pass\n"
    result = run_judged(solution, "", [case], ["f"])
    assert result.cases[0][0] is False and "ValueError" in result.cases[0][1]


def test_a_solution_that_does_not_run_fails_every_case():
    result = run_judged("def f(:\n", "", ["assert f(1) == 1"], ["f"])
    assert result.cases == {-1: (False, result.cases[-1][1])} and "SyntaxError" in result.cases[-1][1]


def test_an_infinite_loop_in_the_candidate_is_a_timeout():
    solution = "def f(x):\n    while True:\n        pass\n"
    result = run_judged(solution, "", ["assert f(1) == 1"], ["f"], timeout_s=1.0)
    assert result.status == "timeout" and result.cases.get(0, (False, ""))[0] is False


SECRET = "expected-value-7f3a9c"


def test_nothing_of_the_tests_exists_inside_the_sandbox():
    # The program searches every file it can read, its memory's environment and its arguments for a marker
    # that only the tests contain; the judge's case passes only if the marker was never found.
    solution = """
import os
found = []
marker = "expected-value-" + "7f3a9c"
for root, dirs, files in os.walk("/"):
    if root.startswith("/proc") or root.startswith("/sys"):
        continue
    for name in files:
        try:
            with open(os.path.join(root, name), "rb") as handle:
                if marker.encode() in handle.read(2_000_000):
                    found.append(os.path.join(root, name))
        except OSError:
            pass
for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
    for part in ("cmdline", "environ"):
        try:
            if marker.encode() in open(f"/proc/{entry}/{part}", "rb").read():
                found.append(entry)
        except OSError:
            pass

def f():
    return found
"""
    result = run_judged(
        solution, f"EXPECTED = []\nUNUSED = {SECRET!r}\n", ["assert f() == EXPECTED"], ["f"], timeout_s=20
    )
    assert result.cases == {0: (True, "")}, result


def test_the_judge_and_the_program_do_not_share_a_uid():
    solution = "import os\ndef uid():\n    return os.getuid()\n"
    setup = "import os\nJUDGE = os.getuid()\nCALLER = " + str(os.getuid()) + "\n"
    result = run_judged(solution, setup, ["assert uid() != JUDGE and uid() != CALLER"], ["uid"])
    assert result.cases == {0: (True, "")}
