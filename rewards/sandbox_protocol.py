"""Plain data across the sandbox's wall, and the server that runs a candidate inside it.

Standard library only: this file is both a module (the trusted judge imports the codec) and, copied into
the sandbox's working directory, the script that the untrusted program runs as (`python -I serve.py`).

The codec carries only built-in values of exact built-in types: None, bool, int, float, str, bytes,
complex, and list, tuple, set, frozenset and dict of those. It is JSON with the containers tagged
(`["T", [...]]` is a tuple), because JSON alone would turn a tuple into a list and a check such as
`candidate(x) == (0, 1)` would fail for a correct solution. Anything else (an instance of a class of the
program's, a subclass of int, a generator) cannot be encoded, so it fails the case: an object whose
`__eq__` always says True never reaches the judge. Decoding builds fresh built-in objects only, with a
depth and a size limit, so what arrives from the sandbox is data and nothing else.

The server (inside the sandbox) reads requests on fd 3 and writes replies on fd 4, a line each. A
request is `(name, args, kwargs)` as a Python literal (written by the trusted judge, after checking that
the arguments are plain data); a reply is `{"ok": value}` or `{"error": "TypeError: ..."}` in JSON. The
server first executes the solution and says `{"ready": true}` (or `{"setup_error": ...}`). The program
may forge any reply it likes on fd 4: that is no more than returning that value, which it can do anyway;
the tests, the expected values and the comparison never enter the sandbox.
"""

from __future__ import annotations

MAX_DEPTH = 64  # nesting of containers, either way
MAX_MESSAGE_BYTES = 8 * 1024 * 1024  # one reply; longer is a failed case
_TAGS = {"L": list, "T": tuple, "S": set, "F": frozenset}
_CONTAINER_TAGS = {list: "L", tuple: "T", set: "S", frozenset: "F"}
# The server runs once per program: it must not import json (with re and enum, a third of its start-up).
# It writes JSON itself, with the C string encoder that json uses too; requests come as Python literals
# from the judge (trusted), read with eval over no builtins but the few names a literal needs.
_LITERAL_NAMES = {"__builtins__": {}, "set": set, "frozenset": frozenset, "nan": float("nan"), "inf": float("inf")}


class NotPlainData(ValueError):
    """A value that is not built from plain built-in types, or a message that does not decode to one."""


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
        return str(value)  # past 4300 digits Python refuses (ValueError): not plain data either
    if kind is str:
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
        return '["' + tag + '",[' + ",".join(to_json(item, depth + 1) for item in value) + "]]"
    if kind is dict:
        pairs = ("[" + to_json(key, depth + 1) + "," + to_json(item, depth + 1) + "]" for key, item in value.items())
        return '["D",[' + ",".join(pairs) + "]]"
    raise NotPlainData(f"a {kind.__name__} is not plain data")


def request_line(name: str, args: tuple, kwargs: dict) -> bytes:
    """A call as one line: the arguments checked to be plain data, then written as a Python literal."""
    to_json([list(args), kwargs])  # NotPlainData for anything else
    return (repr((name, args, kwargs)) + "\n").encode()


def read_request(line: bytes) -> tuple:
    return eval(line.decode(), dict(_LITERAL_NAMES))  # noqa: S307 - a literal written by the trusted judge


def decode(data, depth: int = 0):
    """The value that `to_json` wrote as `data` (parsed by json); every object built here is a fresh built-in."""
    if depth > MAX_DEPTH:
        raise NotPlainData("nested too deeply")
    kind = type(data)
    if data is None or kind is bool or kind is int or kind is str:
        return data
    if kind is float:
        return data
    if kind is not list or len(data) != 2 or type(data[0]) is not str:
        raise NotPlainData(f"not an encoded value: {kind.__name__}")
    tag, body = data
    if tag == "f" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "B" and type(body) is str:
        return bytes.fromhex(body)
    if type(body) is not list:
        raise NotPlainData(f"tag {tag!r} without a list")
    if tag == "C" and len(body) == 2 and all(type(part) in (int, float) for part in body):
        return complex(body[0], body[1])
    if tag in _TAGS:
        items = [decode(item, depth + 1) for item in body]
        try:
            return _TAGS[tag](items)
        except TypeError as error:  # an unhashable member of a set
            raise NotPlainData(str(error)) from error
    if tag == "D":
        result = {}
        for pair in body:
            if type(pair) is not list or len(pair) != 2:
                raise NotPlainData("a dict entry is not a pair")
            try:
                result[decode(pair[0], depth + 1)] = decode(pair[1], depth + 1)
            except TypeError as error:
                raise NotPlainData(str(error)) from error
        return result
    raise NotPlainData(f"unknown tag {tag!r}")


def loads(line: bytes) -> dict:
    """One message; NotPlainData for anything that is not a JSON object (Python's limits on int digits and
    on recursion turn hostile numbers and nesting into errors, caught here)."""
    import json

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
