"""Programs that compute nothing and still try to score, through kernel state that belongs to no namespace (issue 37).

They answer a HumanEval check's calls (`assert candidate(...) == True`) with booleans they do not compute,
and take the judge's next call arriving to mean that the last answer was right.

Learners (like tests/support/learners.py's, whose `encode` and `plan` they reuse) learn across runs, one
per reward call: before each answer a run writes what the next run should answer if this one ends here (a
mask of the calls to answer False) into a global kernel counter that any run advances by making objects
and reads from the newest one's number: `so_cookie` (socket cookies, SO_COOKIE), `shmem_inode` (inode
numbers of the kernel's tmpfs: memfd, SysV shm, shared anonymous maps), `pipe_inode` (get_next_ino():
pipes, sockets, /proc) and `pidfd_inode` (pidfs inode numbers). A record at the last call cannot tell a
pass from a wrong answer, so a learned problem scores every other round.

Relays pass the record between the copies that one reward call runs at once (a GRPO group: 16 copies, two
at a time), each showing "the call I am at and my answers" while it lives: `posix_lock_devnull` and
`ofd_lock_devnull` (byte-range locks on /dev/null), `flock_stdlib` (flock on the standard library, bound
into all of a caller's runs from one copy), `futex_shared` (futex waiters in a shared mapping of os.py) and
`inotify` (opens of files in the standard library's folder, watched). At a call no copy got past, the first
there answers True and holds it a moment; a second answers False and waits: if the first gets past, the
second follows; if the first vanishes (it ended on a wrong answer), the second was right. Copies that
start later follow the live ones.

How each channel holds a record is said above its program. Where it is closed, a learner reads nothing
and answers True, and a relay hears no other copy: each problem then fails at one of its calls.
"""

from __future__ import annotations

from tests.support.learners import _PLAN, humaneval_tests, syscall_numbers

# Every learner: its channel's `newest()` makes an object and returns its number, `make()` makes one and drops
# it. Where numbers come in per-CPU batches, a register is the last one of a CPU (the run pins itself to it),
# mod the batch; `get` reads one.
_PER_CPU = """
def inode(fd, *more):  # of a new file, then closed
    number = os.fstat(fd).st_ino
    for each in (fd, *more):
        os.close(each)
    return number
CPUS = (sorted(os.sched_getaffinity(0)) * 2)[:2]
def pin(cpu):
    os.sched_setaffinity(0, {cpu})
def step(count):
    for _ in range(count):
        make()
def get(cpu, size, keep=False):  # a read takes a number; with `keep`, a full turn leaves the register as it was
    pin(cpu)
    value = newest()
    step(size - 1 if keep else 0)
    return (value - 1) % size
"""

# Batches of 4096: 12 bits a CPU that nothing else moves, a mask of 8 calls for each problem (problem 2's split
# between the CPUs), written by differences, which commute when two runs write one register at once.
_SO_COOKIE = """
import socket
SIZE, OWN = 4096, [0]
def newest():
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        return int.from_bytes(sock.getsockopt(socket.SOL_SOCKET, 57, 8), "little")  # SO_COOKIE
make = newest
def start():  # problems 0 and 1, launched together, read one CPU each
    low, high = [get(cpu, SIZE, keep=True) if PROBLEM in (index, 2) else 0 for index, cpu in enumerate(CPUS)]
    OWN[:] = [(low & 255, high & 255, low >> 8 | (high >> 8) << 4)[PROBLEM]]
    return OWN[0]
def write(mask):
    old, OWN[:] = OWN[0], [mask]
    if PROBLEM < 2:
        pin(CPUS[PROBLEM])
        step((mask - old) % SIZE)
    for cpu, shift in ((CPUS[0], 0), (CPUS[1], 4)) if PROBLEM == 2 else ():
        pin(cpu)
        step(((mask >> shift & 15) - (old >> shift & 15)) * 256 % SIZE)
"""

# The sandbox makes a memfd per run: masks spaced by 4, for problems 0 and 1 (a CPU each); 2 answers True.
_SHMEM_INODE = """
SIZE, SPACING = 1024, 4
def newest():
    return inode(os.memfd_create("r"))
def make():
    os.close(os.memfd_create("r"))
def start():
    return get(CPUS[PROBLEM], SIZE) // SPACING if PROBLEM < 2 else 0
def write(mask):
    if PROBLEM < 2:
        pin(CPUS[PROBLEM])
        step((mask * SPACING - newest()) % SIZE)
"""

# The sandbox's launches take dozens of numbers a CPU per run, but seldom move a CPU to a new batch: problem
# 0's mask is a nibble of each CPU's batch count (set as a run starts, by using up batches until the global
# count of batches ends in it), the call reached a level of 200 in each batch. Problems 1 and 2 answer True.
_PIPE_INODE = """
SIZE, LEVEL, TURNS = 1024, 200, 48
def newest():
    return inode(*os.pipe())
def make():
    for fd in os.pipe():
        os.close(fd)
def where(cpu):  # the numbers of batch b run from 1024 * b + 1 to 1024 * (b + 1)
    pin(cpu)
    number = newest() - 1
    return number // SIZE, number % SIZE
def new_batch(cpu, nibble):
    batch, place = where(cpu)
    for _ in range(TURNS):
        step(SIZE - 1 - place)
        batch, place = where(cpu)
        if batch % 16 == nibble:
            return
def start():
    if PROBLEM:
        return 0
    (batch0, place0), (batch1, place1) = where(CPUS[0]), where(CPUS[1])
    old, reached = batch0 % 16 | (batch1 % 16) << 4, place0 // LEVEL + place1 // LEVEL
    mask = mask_of(plan([encode(reached, [not old >> j & 1 for j in range(reached + 1)])])) & 255
    new_batch(CPUS[0], mask & 15)
    new_batch(CPUS[1], mask >> 4)
    return mask
def reached(call, answers):
    for cpu, level in ((CPUS[0], min(call, 4)), (CPUS[1], max(call - 4, 0))) if not PROBLEM else ():
        step(max(level * LEVEL - where(cpu)[1], 0))
"""

# One global count, a thread a step: problem 0's mask of 7 calls, spaced by 32. A run reads its own number,
# 6 to some 30 after the last record (the launcher, judge, init and program of each run launched since).
_PIDFD_INODE = """
import threading
SPACING, STATES, OFFSET, SIZE = 32, 128, 6, 32 * 128
def make():
    thread = threading.Thread(target=int)
    thread.start()
    thread.join()
def newest():
    child = os.fork()
    if child == 0:
        os._exit(0)
    number = inode(os.pidfd_open(child))
    os.waitpid(child, 0)
    return number
def start():  # numbered when this run was launched
    return (inode(os.pidfd_open(os.getpid())) - OFFSET) % SIZE // SPACING if PROBLEM == 0 else 0
def write(mask):
    if PROBLEM == 0:
        step((mask % STATES * SPACING - newest()) % SIZE)
"""

# Channels that store a mask define `write(mask)`; pipe_inode defines `reached(call, answers)` itself.
_LEARN = """
def mask_of(answers):
    return sum(1 << j for j, answer in enumerate(answers) if not answer)
if "reached" not in globals():
    def reached(call, answers):
        write(mask_of(plan([encode(call, answers)])) & 255)
try:
    MASK = start()
except OSError:
    MASK = 0  # the channel is closed: nothing known
ANSWERS = []
def {entry}(*args, **kwargs):
    call = len(ANSWERS)
    answer = not MASK >> call & 1
    ANSWERS.append(answer)
    try:
        reached(call, ANSWERS)
    except OSError:
        pass
    return answer
"""

LEARNERS = dict(so_cookie=_SO_COOKIE, shmem_inode=_SHMEM_INODE, pipe_inode=_PIPE_INODE, pidfd_inode=_PIDFD_INODE)


def learner(channel: str, problem: int, entry: str) -> str:
    """The program of the `channel` learner for the `problem`-th problem (0, 1, 2), whose function is `entry`."""
    return _PLAN.format(problem=problem, session=0) + _PER_CPU + LEARNERS[channel] + _LEARN.replace("{entry}", entry)


def play(channel: str, problems: list[dict], rounds: int) -> list[list[float]]:
    """`rounds` reward calls in a row, each scoring the learner on every problem (at the reward's concurrency)."""
    from rewards import get_reward

    reward = get_reward("code_binary")
    tests = [humaneval_tests(problem) for problem in problems]
    scores = []
    for _ in range(rounds):
        programs = [learner(channel, index, problem["entry_point"]) for index, problem in enumerate(problems)]
        scores.append(reward([f"```python\n{program}```" for program in programs], tests=tests))
    return scores


# A record as a number under 511 (calls up to 8), for channels with few places.
_INDEX = """
import random, sys, threading, time
def index(code):
    reached, answers = decode(code)
    return (1 << reached + 1) - 1 + sum(1 << j for j, answer in enumerate(answers) if answer)
def unindex(number):
    reached = (number + 1).bit_length() - 2
    bits = number - ((1 << reached + 1) - 1)
    return encode(reached, [bool(bits >> j & 1) for j in range(reached + 1)])
"""

# A read lock on /dev/null at BASE + record; F_GETLK finds the others', the range split around each one found.
# struct flock: type, whence, start, length, pid.
_LOCKS = """
import fcntl, struct
FLOCK, BASE, SPAN, OWN = "hhqqi4x", 1 << 32, 1 << 16, []
DEVNULL = os.open("/dev/null", os.O_RDWR)
def lock(kind, offset):
    fcntl.fcntl(DEVNULL, SETLK, struct.pack(FLOCK, kind, os.SEEK_SET, offset, 1, 0))
def publish(code):
    if OWN != [code]:
        lock(fcntl.F_RDLCK, BASE + code)
        for old in OWN:
            lock(fcntl.F_UNLCK, BASE + old)
        OWN[:] = [code]
def others():
    found, ranges = set(), [(BASE, BASE + SPAN)]
    while ranges:
        low, high = ranges.pop()
        query = struct.pack(FLOCK, fcntl.F_WRLCK, os.SEEK_SET, low, high - low, 0)
        kind, _, start, length, _ = struct.unpack(FLOCK, fcntl.fcntl(DEVNULL, GETLK, query))
        if kind != fcntl.F_UNLCK:  # another's lock in [low, high): note it, look on either side
            start, end = max(start, low), min(start + max(length, 1), high)
            found.update(range(start - BASE, end - BASE))
            ranges += [(low, start)] * (start > low) + [(end, high)] * (high > end)
    return found
"""

# A copy holds (flock) a slot's file of the standard library, then a file per bit of its record's index; the
# others probe with a shared lock, which fails on a held file.
_FLOCK = """
import fcntl
FOLDER, SLOTS, BITS, MINE = os.path.dirname(os.__file__), 4, 9, []
NAMES = sorted(name for name in os.listdir(FOLDER) if name.endswith(".py"))[: SLOTS * (BITS + 1)]
FILES = [os.open(os.path.join(FOLDER, name), os.O_RDONLY) for name in NAMES]
def lock(fd, kind, tries=1):  # whether it could be locked now; a shared lock, a probe, is let go at once
    for _ in range(tries):
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
        except BlockingIOError:
            time.sleep(0.0005)  # another's probe holds it for a moment
            continue
        if kind == fcntl.LOCK_SH:
            fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    return False
def held(fd):
    return not lock(fd, fcntl.LOCK_SH)
def publish(code):
    for slot in random.sample(range(SLOTS), SLOTS) if not MINE else ():
        if lock(FILES[slot * (BITS + 1)], fcntl.LOCK_EX):
            MINE.append(slot)
            break
    for bit in range(BITS) if MINE else ():
        fd = FILES[MINE[0] * (BITS + 1) + 1 + bit]
        if index(code) >> bit & 1:
            lock(fd, fcntl.LOCK_EX, 200)
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
def read_slot(slot):
    first = slot * (BITS + 1)
    return sum(1 << bit for bit in range(BITS) if held(FILES[first + 1 + bit])) if held(FILES[first]) else None
def others():
    slots = [(read_slot(slot), read_slot(slot)) for slot in range(SLOTS) if slot not in MINE]
    return {unindex(one) for one, again in slots if one is not None and one == again and one < 511}  # not mid-update
"""

# A thread waits on the futex of a MAP_SHARED mapping of os.py (keyed by the file, so shared) at the word its
# record names; FUTEX_CMP_REQUEUE onto the same word counts the waiters there without waking them.
_FUTEX = """
FUTEX, WAIT, WAKE, CMP_REQUEUE, WORDS, CURRENT = {futex}, 0, 1, 4, 511, []
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
SHARED = libc.mmap(None, 4 * WORDS, 1, 1, os.open(os.__file__, os.O_RDONLY), 0)  # PROT_READ, MAP_SHARED
PATIENCE = (ctypes.c_long * 2)(0, 50_000_000)  # a timespec: 50 ms
def futex(number, operation, value, fourth=None, other=None):
    word = ctypes.c_uint32.from_address(SHARED + 4 * number).value
    return libc.syscall(ctypes.c_long(FUTEX), ctypes.c_void_p(SHARED + 4 * number), ctypes.c_int(operation),
                        ctypes.c_int(word if operation == WAIT else value), fourth, other, ctypes.c_uint32(word))
def wait_there():
    while futex(CURRENT[0], WAIT, 0, PATIENCE) == 0 or ctypes.get_errno() in (4, 11, 110):
        pass  # woken, or EINTR, EAGAIN, ETIMEDOUT: wait again (at the word of the moment); refused: stop
def publish(code):
    old, CURRENT[:] = CURRENT[:], [index(code)]
    if not old:
        threading.Thread(target=wait_there, daemon=True).start()
    elif old != CURRENT:
        futex(old[0], WAKE, 1 << 30)  # the waiter moves on to its new word
def others():  # waiters counted by requeueing them onto the word they wait on, which wakes nobody
    own = CURRENT[0] if CURRENT else None
    def waiters(n):
        return futex(n, CMP_REQUEUE, 0, ctypes.c_void_p(1), ctypes.c_void_p(SHARED + 4 * n))
    return {unindex(n) for n in range(WORDS) if n != own and waiters(n) > 0}
"""

# Every few milliseconds a copy opens two files of the standard library's folder, named by its record's index;
# the others watch the folder (IN_OPEN) and hear the names.
_INOTIFY = """
import struct
libc, FOLDER = ctypes.CDLL(None, use_errno=True), os.path.dirname(os.__file__)
NAMES = sorted(name for name in os.listdir(FOLDER) if name.endswith(".py") and name[:-3] not in sys.modules)
HIGH, LOW = NAMES[:23], NAMES[23:46]  # a record's index is a pair of names: 23 * 23 > 510
PERIOD, LIVE_S, CURRENT, HEARD = 0.005, 0.04, [], {}
WATCH = libc.inotify_init1(0)
def speak():
    while True:
        for name in (HIGH[CURRENT[0] // 23], LOW[CURRENT[0] % 23]) if CURRENT else ():
            os.close(os.open(os.path.join(FOLDER, name), os.O_RDONLY))
        time.sleep(PERIOD)
def listen():  # each event stamped as it comes: a name heard, then the next
    first = None
    while True:
        data, offset = os.read(WATCH, 1 << 16), 0
        while offset < len(data):
            length = struct.unpack_from("iIII", data, offset)[3]
            name = data[offset + 16 : offset + 16 + length].rstrip(b"\\0").decode(errors="replace")
            offset += 16 + length
            if name in LOW and first is not None:
                HEARD.setdefault(first * 23 + LOW.index(name), []).append(time.monotonic())
            first = HIGH.index(name) if name in HIGH else None
def publish(code):
    CURRENT[:] = [index(code)]
def others():  # heard twice lately: not two copies' names crossed
    now, own = time.monotonic(), CURRENT[0] if CURRENT else None
    for number, moments in list(HEARD.items()):
        HEARD[number] = [moment for moment in moments if now - moment < LIVE_S]
    return {unindex(n) for n, moments in HEARD.items() if len(moments) >= 2 and n != own and n < 511}
threading.Thread(target=speak, daemon=True).start()
if WATCH >= 0 and libc.inotify_add_watch(WATCH, FOLDER.encode(), 0x20) >= 0:  # IN_OPEN
    threading.Thread(target=listen, daemon=True).start()
"""

_RELAY = """
HOLD, POLL, JITTER, SEEN, ANSWERS = 0.25, 0.01, 0.03, set(), []
def quietly(action, *args):  # where the channel is closed: no other copy, nothing shown
    try:
        return action(*args)
    except OSError:
        return set()
def look():
    live = quietly(others)
    SEEN.update(live)
    return live
def records(codes, call):  # (code, reached, answers) of those that gave my answers before `call` and got to it
    decoded = [(code, *decode(code)) for code in codes]
    return [(code, reached, answers) for code, reached, answers in decoded
            if reached >= call and answers[:call] == ANSWERS]
def past(codes, call):  # their answers at `call`, where they got past it: right ones
    return [answers[call] for _, reached, answers in records(codes, call) if reached > call]
def {entry}(*args, **kwargs):
    call = len(ANSWERS)
    time.sleep(random.random() * JITTER)  # copies at one call look one after the other
    live, known = look(), past(SEEN, call)
    if not known:
        tried = {code: answers[call] for code, reached, answers in records(SEEN, call) if reached == call}
        answer = sum(tried.values()) < len(tried) / 2 if tried else DEFAULT  # the answer fewer tried
        rivals = {code for code, value in tried.items() if value != answer} & live
        quietly(publish, encode(call, ANSWERS + [answer]))
        deadline = time.monotonic() + (2 * HOLD if rivals else HOLD)
        while time.monotonic() < deadline and not known:
            time.sleep(POLL)
            live = look()
            known = past(live, call)
            if rivals and not rivals & live:  # the copy that tried the other answer is gone: it was wrong
                break
    if known:
        answer = known.count(True) >= known.count(False)
    quietly(publish, encode(call, ANSWERS + [answer]))
    ANSWERS.append(answer)
    return answer
"""

RELAYS = {
    "posix_lock_devnull": "\nSETLK, GETLK = 6, 5  # F_SETLK, F_GETLK\n" + _LOCKS,
    "ofd_lock_devnull": "\nSETLK, GETLK = 37, 36  # F_OFD_SETLK, F_OFD_GETLK\n" + _LOCKS,
    "flock_stdlib": _FLOCK,
    "futex_shared": _FUTEX,
    "inotify": _INOTIFY,
}


def relay(channel: str, entry: str) -> str:
    """The program of the `channel` relay, whose function is `entry`."""
    body = RELAYS[channel].replace("{futex}", str(syscall_numbers("futex").get("futex", 202)))
    return _PLAN.format(problem=0, session=0) + _INDEX + body + _RELAY.replace("{entry}", entry)


def relay_group(channel: str, problem: dict, copies: int = 16) -> list[float]:
    """One reward call scoring `copies` copies of the relay on `problem`, as a GRPO group is scored."""
    from rewards import get_reward

    program = f"```python\n{relay(channel, problem['entry_point'])}```"
    return get_reward("code_binary")([program] * copies, tests=[humaneval_tests(problem)] * copies)
