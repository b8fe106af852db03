"""Plain data across the sandbox's wall, and the server that runs a candidate inside it.

Standard library only: this file is both a module (the trusted judge imports the codec) and, copied into
the sandbox's working directory, the script that the untrusted program runs as (`python -I serve.py`).

The codec carries only built-in values of exact built-in types: None, bool, int, float, str, bytes,
complex, and list, tuple, set, frozenset and dict of those, and each crosses exactly, as Python has it:
- containers are tagged (`["T", [...]]` is a tuple), because JSON alone would turn a tuple into a list
  and a check such as `candidate(x) == (0, 1)` would fail for a correct solution;
- a str is compared by its code points, so one that holds a surrogate (`'\\ud83d' + '\\ude00'`, two code
  points) crosses as the hex of its UTF-32 (`["U", ...]`): JSON would join the pair into one character,
  '\\U0001F600', making a wrong answer right and a right one fail a `len` check;
- an int past 4096 bits crosses as hex text (`["I", "-1f..."]`), which has no digit limit and converts in
  linear time (Python refuses decimal past 4,300 digits), up to MAX_INT_BITS either way.
Anything else (an instance of a class of the program's, a subclass of int, a generator) cannot be encoded,
so it fails the case: an object whose `__eq__` always says True never reaches the judge.

Decoding builds fresh built-in objects only, and in bounded time and memory, whatever the sandbox sends:
a reply is refused before it is parsed when it is longer than MAX_MESSAGE_BYTES or holds more than
MAX_VALUES JSON values (counted on the bytes, by the commas and brackets they need: json.loads would
build an object for each, so a dense 8 MB reply would take the judge past 200 MB); nesting stops at
MAX_DEPTH; and a set, frozenset or dict whose members' hashes collide (ints that are multiples of
`sys.hash_info.modulus`, tuples of -1 and -2, ...) is refused when building it would cost more than
linear work, since each member would be compared with every earlier one of its hash. A refused reply
fails the case, like any value that is not plain data.

The server (inside the sandbox) reads requests on fd 3 and writes replies on fd 4, a line each. A
request is `(name, args, kwargs)` as a Python literal (written by the trusted judge after checking that
the arguments are plain data: `to_literal`, hex for big ints); a reply is `{"ok": value}` or
`{"error": "TypeError: ..."}` in JSON. The server first executes the solution and says `{"ready": true}`
(or `{"setup_error": ...}`). The program may forge any reply it likes on fd 4: that is no more than
returning that value, which it can do anyway; the tests, the expected values and the comparison never
enter the sandbox.
"""

from __future__ import annotations

MAX_DEPTH = 64  # nesting of containers, either way
MAX_MESSAGE_BYTES = 8 * 1024 * 1024  # one reply; longer is a failed case
MAX_VALUES = 500_000  # JSON values in one reply (what json.loads would build: ~100 bytes of memory each)
MAX_INT_BITS = 8 * 1024 * 1024  # one int, either way: 1 MiB (2.5 million decimal digits)
DECIMAL_INT_BITS = 4096  # ints up to this size cross as JSON numbers, larger ones as hex text
MAX_COLLISION_WORK = 100_000  # compares of colliding set members or dict keys allowed, besides 2 per member
_TAGS = {"L": list, "T": tuple, "S": set, "F": frozenset}
_CONTAINER_TAGS = {list: "L", tuple: "T", set: "S", frozenset: "F"}
_SCALARS = frozenset({type(None), bool, int, float, str})  # what json.loads gives that decodes to itself
_DECIMAL_BOUND = 1 << DECIMAL_INT_BITS
_HEX = "0123456789abcdef"
# The server runs once per program: it must not import json (with re and enum, a third of its start-up).
# It writes JSON itself, with the C string encoder that json uses too; requests come as Python literals
# from the judge (trusted), read with eval over no builtins but the few names a literal needs.
_LITERAL_NAMES = {
    "__builtins__": {},
    "set": set,
    "frozenset": frozenset,
    "complex": complex,
    "nan": float("nan"),
    "inf": float("inf"),
}


class NotPlainData(ValueError):
    """A value that is not built from plain built-in types, or a message that does not decode to one."""


def _check_int(value: int) -> None:
    if value.bit_length() > MAX_INT_BITS:
        raise NotPlainData(f"an int of {value.bit_length()} bits is past the limit of {MAX_INT_BITS}")


def _has_surrogate(value: str) -> bool:
    if value.isascii():
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return True
    return False


def to_json(value, depth: int = 0) -> str:
    """`value` as the tagged JSON text that `decode(json.loads(...))` reads back; NotPlainData otherwise."""
    from _json import encode_basestring_ascii as quote

    if depth > MAX_DEPTH:
        raise NotPlainData("nested too deeply")
    kind = type(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        if -_DECIMAL_BOUND < value < _DECIMAL_BOUND:
            return str(value)
        _check_int(value)
        return '["I","' + format(value, "x") + '"]'
    if kind is str:
        if _has_surrogate(value):
            return '["U","' + value.encode("utf-32-le", "surrogatepass").hex() + '"]'
        return quote(value)
    if kind is float:
        if value != value or value in (float("inf"), float("-inf")):
            return '["f",' + quote(repr(value)) + "]"  # JSON has no nan or infinity
        return repr(value)
    if kind is bytes:
        return '["B",' + quote(value.hex()) + "]"
    if kind is complex:
        return '["C",[' + to_json(value.real) + "," + to_json(value.imag) + "]]"
    tag = _CONTAINER_TAGS.get(kind)
    if tag is not None:
        kinds = set(map(type, value))  # a list of small ints or of ASCII strs is written at C speed
        if kinds == {int} and -_DECIMAL_BOUND < min(value) and max(value) < _DECIMAL_BOUND:
            body = ",".join(map(str, value))
        elif kinds == {str} and all(map(str.isascii, value)):
            body = ",".join(map(quote, value))
        else:
            body = ",".join(to_json(item, depth + 1) for item in value)
        return '["' + tag + '",[' + body + "]]"
    if kind is dict:
        pairs = ("[" + to_json(key, depth + 1) + "," + to_json(item, depth + 1) + "]" for key, item in value.items())
        return '["D",[' + ",".join(pairs) + "]]"
    raise NotPlainData(f"a {kind.__name__} is not plain data")


def to_literal(value, depth: int = 0) -> str:
    """`value` as a Python literal for the server's eval (names from _LITERAL_NAMES); NotPlainData otherwise.

    Like `repr`, but it checks that the value is plain data, writes ints past 4096 bits in hex (a decimal
    literal past 4,300 digits does not compile) and a complex as `complex(re, im)` (`repr` can give `infj`).
    """
    if depth > MAX_DEPTH:
        raise NotPlainData("nested too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is float or kind is str or kind is bytes:
        return repr(value)
    if kind is int:
        if -_DECIMAL_BOUND < value < _DECIMAL_BOUND:
            return repr(value)
        _check_int(value)
        return hex(value)
    if kind is complex:
        return "complex(" + repr(value.real) + "," + repr(value.imag) + ")"
    if kind is dict:
        return "{" + ",".join(to_literal(k, depth + 1) + ":" + to_literal(v, depth + 1) for k, v in value.items()) + "}"
    if kind in _CONTAINER_TAGS:
        items = ",".join(to_literal(item, depth + 1) for item in value)
        if kind is list:
            return "[" + items + "]"
        if kind is tuple:
            return "(" + items + ("," if len(value) == 1 else "") + ")"
        text = "{" + items + "}" if value else "set()"
        return text if kind is set else "frozenset(" + (text if value else "") + ")"
    raise NotPlainData(f"a {kind.__name__} is not plain data")


def request_line(name: str, args: tuple, kwargs: dict) -> bytes:
    """A call as one line: the arguments checked to be plain data and written as a Python literal."""
    return ("(" + repr(name) + "," + to_literal(tuple(args)) + "," + to_literal(dict(kwargs)) + ")\n").encode()


def read_request(line: bytes) -> tuple:
    return eval(line.decode(), dict(_LITERAL_NAMES))  # noqa: S307 - a literal written by the trusted judge


def _weight(value) -> int:
    """About how many elementary compares an equality test of `value` with an equal-hashed one may take."""
    kind = type(value)
    if kind is tuple or kind is frozenset:
        return 1 + sum(map(_weight, value))
    if kind is str or kind is bytes:
        return 1 + len(value) // 64
    if kind is int:
        return 1 + value.bit_length() // 1024
    return 1


def _check_hashes(members: list) -> None:
    """Refuse set members (or dict keys) whose hashes collide enough to make building the set quadratic.

    A set compares a new member with every earlier member of the same hash; members with distinct hashes
    cost one probe each. So the work is the sum, over members, of (equal-hashed members - 1) x the size of
    the member: allowed up to 2 per member plus MAX_COLLISION_WORK (a few -1/-2 pairs are ordinary data).
    """
    try:
        hashes = list(map(hash, members))
    except TypeError as error:  # an unhashable member
        raise NotPlainData(str(error)) from error
    if len(set(hashes)) == len(hashes):
        return
    from collections import Counter

    counts = Counter(hashes)
    budget, work = MAX_COLLISION_WORK + 2 * len(members), 0
    for member, value in zip(members, hashes, strict=True):
        if counts[value] > 1:
            work += (counts[value] - 1) * _weight(member)
            if work > budget:
                raise NotPlainData(f"{len(members)} members whose hashes collide: too costly to build")


def _text(body) -> str:
    if type(body) is not str or len(body) % 8:
        raise NotPlainData("a tagged str is not UTF-32 in hex")
    try:
        return bytes.fromhex(body).decode("utf-32-le", "surrogatepass")
    except ValueError as error:  # not hex, or a code point past 0x10FFFF
        raise NotPlainData(f"a tagged str does not decode: {error}") from error


def _big_int(body) -> int:
    digits = body[1:] if type(body) is str and body.startswith("-") else body
    if type(digits) is not str or not digits or digits.strip(_HEX) or len(digits) > MAX_INT_BITS // 4:
        raise NotPlainData("a tagged int is not lower-case hex within the size limit")
    value = int(digits, 16)
    return -value if digits is not body else value


def decode(data, depth: int = 0):
    """The value that `to_json` wrote as `data` (parsed by json); every object built here is a fresh built-in."""
    if depth > MAX_DEPTH:
        raise NotPlainData("nested too deeply")
    kind = type(data)
    if kind in _SCALARS:
        return data
    if kind is not list or len(data) != 2 or type(data[0]) is not str:
        raise NotPlainData(f"not an encoded value: {kind.__name__}")
    tag, body = data
    if tag == "f" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "U":
        return _text(body)
    if tag == "I":
        return _big_int(body)
    if tag == "B" and type(body) is str:
        try:
            return bytes.fromhex(body)
        except ValueError as error:
            raise NotPlainData("a tagged bytes is not hex") from error
    if type(body) is not list:
        raise NotPlainData(f"tag {tag!r} without a list")
    if tag == "C" and len(body) == 2:
        real, imag = decode(body[0], depth + 1), decode(body[1], depth + 1)
        if type(real) is float and type(imag) is float:
            return complex(real, imag)
        raise NotPlainData("a complex is not two floats")
    if tag in _TAGS:
        # json.loads made `body` for this message alone: a list of scalars is already the value.
        items = body if _SCALARS.issuperset(map(type, body)) else [decode(item, depth + 1) for item in body]
        if tag == "L":
            return items
        if tag == "T":
            return tuple(items)
        _check_hashes(items)
        return _TAGS[tag](items)
    if tag == "D":
        keys, values = [], []
        for pair in body:
            if type(pair) is not list or len(pair) != 2:
                raise NotPlainData("a dict entry is not a pair")
            keys.append(decode(pair[0], depth + 1))
            values.append(decode(pair[1], depth + 1))
        _check_hashes(keys)
        return dict(zip(keys, values, strict=True))
    raise NotPlainData(f"unknown tag {tag!r}")


def loads(line: bytes) -> dict:
    """One message; NotPlainData for anything that is not a JSON object, or that is too big to parse.

    The size and the number of values are checked on the bytes, before json.loads builds anything: every
    JSON value but the first of an array or object comes after a comma, and each array or object opens
    with a bracket, so these three counts bound what parsing can allocate. Python's limits on int digits
    and on recursion turn hostile numbers and nesting into errors, caught here."""
    import json

    if len(line) > MAX_MESSAGE_BYTES:
        raise NotPlainData(f"a message of {len(line)} bytes is past the limit of {MAX_MESSAGE_BYTES}")
    values = line.count(b",") + line.count(b"[") + line.count(b"{")
    if values > MAX_VALUES:
        raise NotPlainData(f"a message of about {values} values is past the limit of {MAX_VALUES}")
    try:
        message = json.loads(line)
    except (ValueError, RecursionError, MemoryError, UnicodeDecodeError) as error:
        raise NotPlainData(f"unreadable message: {type(error).__name__}") from error
    if type(message) is not dict:
        raise NotPlainData("a message is not an object")
    return message


def _describe(error: BaseException) -> str:
    try:
        return (type(error).__name__ + ": " + str(error))[:300]
    except BaseException:  # noqa: B036 - a hostile exception's __str__ may raise anything
        return "an exception that cannot be printed"


def serve(solution_path: str = "solution.py", requests_fd: int = 3, replies_fd: int = 4) -> None:
    """Inside the sandbox: run the solution, then answer calls until the judge closes the request pipe."""
    import os
    import sys

    requests = os.fdopen(requests_fd, "rb")
    write = os.write

    def reply(text: str) -> None:
        data = (text + "\n").encode()
        while data:
            data = data[write(replies_fd, data) :]

    def error(what: BaseException) -> str:
        from _json import encode_basestring_ascii as quote

        return '{"error":' + quote(_describe(what)) + "}"

    namespace = {"__name__": "__solution__", "__builtins__": __builtins__}
    try:
        with open(solution_path, encoding="utf-8") as handle:
            source = handle.read()
        exec(compile(source, "solution.py", "exec"), namespace)  # noqa: S102 - it runs in the sandbox
    except BaseException as failure:  # noqa: B036 - SystemExit and KeyboardInterrupt from the solution too
        reply('{"setup_error":' + error(failure)[9:])
        return
    reply('{"ready":true}')
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))  # deep recursion is a solution's right
    for line in requests:
        try:
            name, args, kwargs = read_request(line)
            function = namespace.get(name)
            if not callable(function):
                raise NameError(f"the solution defines no function {name!r}")
            reply('{"ok":' + to_json(function(*args, **kwargs)) + "}")
        except BaseException as failure:  # noqa: B036 - a failed call is an answer, not the end of the server
            try:
                reply(error(failure))
            except BaseException:  # noqa: B036
                return


if __name__ == "__main__":
    serve()
