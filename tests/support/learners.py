"""Programs that compute nothing and still try to score: they learn a problem's answers across runs (issue 29).

A learner answers the calls of a HumanEval check (`assert candidate(...) == True`) with booleans it does
not compute. The judge's next call arriving says that the previous answer was right; the learner writes
down, in kernel state that outlives its run, how far it got and what it answered, and the next run reads
that and answers better. Three places to write it down, one learner each:

- `key_users`: the run's own user keyring (add_key), read by later runs from /proc/key-users, which lists
  every uid's key count and bytes: the problem is the number of keys, the record the number of bytes;
- `session_keyring`: keys in the session keyring that every run inherits from its caller (keyctl);
- `page_cache`: which pages of a standard library file are cached, evicted with posix_fadvise(DONTNEED)
  and cached by a read, probed with mincore (or preadv2 with RWF_NOWAIT).

Where the channel is closed the learner knows nothing and answers True to every call, which each of the
three problems of tests/test_sandbox_crossrun.py fails.
"""

from __future__ import annotations

import ctypes
import json

# A record is one int: the index of the last call that arrived (under 16) and the answers given up to it.
_PLAN = """
import ctypes, os
PROBLEM, SESSION = {problem}, {session}  # SESSION tells this test's records from older ones
DEFAULT = True

def decode(code):
    reached, bits = code % 16, code // 16
    return reached, [bool(bits >> j & 1) for j in range(reached + 1)]

def encode(reached, answers):
    return reached + 16 * sum(1 << j for j, answer in enumerate(answers) if answer)

def plan(records):
    # Answer j is known where records got past call j (the majority of those agreeing on what came before);
    # at the first call that none got past, the answer not yet tried there, or after both, the one tried less.
    decoded = [decode(code) for code in records]
    known = []
    for j in range(16):
        decoded = [(reached, answers) for reached, answers in decoded if answers[:j] == known]
        passed = [answers[j] for reached, answers in decoded if reached > j]
        if passed:
            known.append(passed.count(True) >= passed.count(False))
            continue
        tried = [answers[j] for reached, answers in decoded if reached == j]
        return known + ([tried.count(True) < tried.count(False)] if tried else [])
    return known
"""

_SYSCALLS = """
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
ADD_KEY, KEYCTL = {add_key}, {keyctl}

def add_key(description, payload, keyring):
    return libc.syscall(ADD_KEY, b"user", description, payload, ctypes.c_size_t(len(payload)), ctypes.c_int(keyring))

def keyctl(*args):
    return libc.syscall(KEYCTL, *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
"""

_KEY_USERS = """
USER_KEYRING = -4
TAG = PROBLEM + 3 * SESSION

def key_users():
    try:
        with open("/proc/key-users") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return {}
    table = {}
    for line in lines:
        fields = line.replace(":", " ").split()
        table[int(fields[0])] = (int(fields[2].split("/")[0]), int(fields[4].split("/")[0]))
    return table

def read_records():
    for index in range(TAG):  # the problem and the session, as a number of keys of 3 bytes each
        add_key(b"d%d" % index, b"y", USER_KEYRING)
    add_key(b"r", b"x", USER_KEYRING)  # the record: its payload is code + 2 bytes; 1 byte is no record yet
    table = key_users()
    if os.getuid() not in table:
        return []
    keys, size = table[os.getuid()]
    base_keys, base_bytes = keys - TAG - 1, size - 3 * TAG - 2
    records = []
    for uid, (keys, size) in table.items():
        tag = keys - base_keys - 1
        payload = size - base_bytes - 3 * tag - 1
        if uid != os.getuid() and tag == TAG and payload >= 2:
            records.append(payload - 2)
    return records

def write_record(code):
    add_key(b"r", b"x" * (code + 2), USER_KEYRING)
"""

_SESSION_KEYRING = """
SESSION_KEYRING, DESCRIBE, READ = -3, 6, 11
NAME = b"learner-%d-%d-" % (SESSION, PROBLEM) + os.urandom(4).hex().encode()

def read_records():
    buffer = ctypes.create_string_buffer(4096)
    size = keyctl(READ, SESSION_KEYRING, buffer, 4096)
    if size <= 0:
        return []
    serials = [int.from_bytes(buffer.raw[i:i + 4], "little", signed=True) for i in range(0, min(size, 4096), 4)]
    records = []
    for serial in serials:
        if keyctl(DESCRIBE, serial, buffer, 4096) > 0 and buffer.value.split(b";")[-1].startswith(NAME[:-8]):
            length = keyctl(READ, serial, buffer, 4096)
            if length > 0:
                records.append(int(buffer.raw[:length]))
    return records

def write_record(code):
    add_key(NAME, str(code).encode(), SESSION_KEYRING)
"""

_PAGE_CACHE = """
import mmap
PAGE = mmap.PAGESIZE
FIRST, CODE_BITS = 40 * PROBLEM, 20  # the record and the session; then two marker pages: cached, evicted
PATH = os.path.join(os.path.dirname(os.__file__), "pydoc_data", "topics.py")
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open(PATH, os.O_RDONLY)
try:
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no readahead: a read caches one page
except OSError:
    pass

def cached_pages(count):
    bits = []
    for page in range(count):  # a read that must not wait fails on a page that is not cached
        try:
            os.preadv(fd, [bytearray(1)], (FIRST + page) * PAGE, os.RWF_NOWAIT)
            bits.append(True)
        except BlockingIOError:
            bits.append(False)
        except OSError:
            break
    else:
        return bits
    # mincore (which shows the cache of a file only to who may write it, else says every page is cached)
    address = libc.mmap(None, (FIRST + count) * PAGE, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED: nothing faulted in
    vector = (ctypes.c_ubyte * count)()
    if address in (None, ctypes.c_void_p(-1).value):
        return [False] * count
    if libc.mincore(ctypes.c_void_p(address + FIRST * PAGE), count * PAGE, vector) != 0:
        return [False] * count
    return [bool(byte & 1) for byte in vector]

def read_records():
    bits = cached_pages(CODE_BITS + 2)
    if bits[CODE_BITS] and not bits[CODE_BITS + 1]:
        value = sum(1 << j for j in range(CODE_BITS) if bits[j])
        return [value >> 4] if value & 15 == SESSION else []
    return []

def write_record(code):
    value = code << 4 | SESSION
    wanted = [bool(value >> j & 1) for j in range(CODE_BITS)] + [True, False]
    for page, bit in enumerate(wanted):
        offset = (FIRST + page) * PAGE
        try:
            if bit:
                os.pread(fd, 1, offset)
            else:
                os.posix_fadvise(fd, offset, PAGE, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass
"""

_ANSWER = """
PLAN = plan(read_records())
ANSWERS = []

def {entry}(*args, **kwargs):
    call = len(ANSWERS)
    answer = PLAN[call] if call < len(PLAN) else DEFAULT
    ANSWERS.append(answer)
    write_record(encode(call, ANSWERS))
    return answer
"""

CHANNELS = {
    "key_users": _SYSCALLS + _KEY_USERS,
    "session_keyring": _SYSCALLS + _SESSION_KEYRING,
    "page_cache": _PAGE_CACHE,
}


def syscall_numbers(*names: str) -> dict[str, int]:
    """The numbers of system calls on this machine, by name, from libseccomp (as the sandbox's filter finds them);
    a name this architecture or library lacks is left out."""
    library = ctypes.CDLL("libseccomp.so.2")
    library.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    numbers = {name: library.seccomp_syscall_resolve_name(name.encode()) for name in names}
    return {name: number for name, number in numbers.items() if number >= 0}


def learner(channel: str, problem: int, entry: str, session: int) -> str:
    """The program of the `channel` learner for the `problem`-th problem (0, 1, 2), whose function is `entry`.

    `session` (0 to 15) sets the learners of one test apart from those of earlier tests on the same machine,
    whose records may still be there (on a kernel that keeps them)."""
    numbers = syscall_numbers("add_key", "keyctl")
    body = CHANNELS[channel].replace("{add_key}", str(numbers["add_key"])).replace("{keyctl}", str(numbers["keyctl"]))
    return _PLAN.format(problem=problem, session=session) + body + _ANSWER.format(entry=entry)


def humaneval_tests(problem: dict) -> str:
    return json.dumps({"test": problem["test"], "entry_point": problem["entry_point"], "prompt": problem["prompt"]})


def play(channel: str, problems: list[dict], session: int, rounds: int) -> list[list[float]]:
    """`rounds` reward calls in a row, each scoring the learner on every problem (at the reward's concurrency)."""
    from rewards import get_reward

    reward = get_reward("code_binary")
    tests = [humaneval_tests(problem) for problem in problems]
    scores = []
    for _ in range(rounds):
        programs = [learner(channel, index, p["entry_point"], session) for index, p in enumerate(problems)]
        scores.append(reward([f"```python\n{program}```" for program in programs], tests=tests))
    return scores
