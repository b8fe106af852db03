"""The sandbox's file system, built from nothing, and the run's cgroups: the launcher's mount work.

Loaded by rewards/code/sandbox/launcher.py (standard library only, like it) before any namespace, and used in
init, the first process of the run's namespaces, before the program starts, and in the judge, which joins
the run's cgroups too. What goes into the root is decided by the caller (rewards/code/sandbox/root.py: a
private copy in memory of what a run needs); this module only mounts it, with device nodes of the run's
own and no /proc.
"""

from __future__ import annotations

import ctypes
import os
import stat

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
MNT_DETACH = 2
# All a program needs of /dev, as (name, minor) of the memory devices (major 1). Made anew in each run's own
# /dev (as root), not bound from the host: locks, leases and watches on the host's /dev/null are state that
# every run alive at once shares (issue 37). Where mknod is not ours to make (a user namespace), the host's
# nodes are bound, and the seccomp filter takes away the calls that would share state through them. No
# /dev/zero (issue 58): a shared map of it is a new inode of the kernel's internal tmpfs, which moves the
# inode counter that later runs read (the filter refuses shared maps too; this is the second wall).
DEVICES = (("null", 3), ("full", 7), ("random", 8), ("urandom", 9))
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}.get(os.uname().machine, -1)
SANDBOX_TMP = "/tmp"  # where the new root is built (a tmpfs over the host's /tmp, in our mount namespace only)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.syscall.restype = ctypes.c_long


def _call(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    source, fstype, data = (None if value is None else os.fsencode(value) for value in (source, fstype, data))
    _call(_libc.mount(source, os.fsencode(target), fstype, flags, data), f"mount {target}")


def _bind(handle: int, target: str, is_dir: bool) -> None:
    """Bind the host path held open as `handle` at `target` (inside the new root), read-only."""
    if is_dir:
        os.makedirs(target, 0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
        if not os.path.exists(target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    mount(f"/proc/self/fd/{handle}", target, None, MS_BIND | MS_REC)
    try:  # a copy in /dev/shm (root.py) may come from a noexec mount: as root, the bind need not be
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
    except PermissionError:
        # A user namespace locks the flags it found on a mount (nodev, noexec): remounting must keep them.
        flags = os.statvfs(target).f_flag
        extra = MS_NOSUID | (MS_NODEV if flags & os.ST_NODEV else 0) | (MS_NOEXEC if flags & os.ST_NOEXEC else 0)
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | extra)


def build_root(config: dict, work_dir: str, uid: int, gid: int) -> None:
    """A root file system made from nothing: a tmpfs with only the listed paths bound into it, read-only.

    Every host path is opened (O_PATH) before anything is mounted, since the new root's tmpfs goes over
    /tmp, where a path may lie. Then: the binds; an empty tmpfs over each site-packages that a bind
    brought in, with only the allowlisted packages bound into it; the device nodes a program needs, made
    anew where we may; the program's private /tmp and /dev/shm (no /proc); pivot_root into it, the old root
    detached; the root itself made read-only.
    """
    spec = config["root"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount from here on propagates to the host
    held = []
    for source, target in spec["binds"] + spec["allowed"] + [(f"/dev/{name}", f"/dev/{name}") for name, _ in DEVICES]:
        try:
            held.append((target, os.open(source, os.O_PATH), os.path.isdir(source)))
        except OSError:
            if not source.startswith("/dev/"):
                raise
    new_root = SANDBOX_TMP
    mount("tmpfs", new_root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096")
    inside = lambda path: new_root + path  # noqa: E731
    allowed = {target for _, target in spec["allowed"]}
    devices = _make_devices(inside("/dev"))
    for target, handle, is_dir in sorted(held, key=lambda item: item[0]):
        if target in allowed or (devices and target.startswith("/dev/")):
            continue
        _bind(handle, inside(target), is_dir)
    for hidden in spec["hidden"]:
        try:
            os.makedirs(inside(hidden), 0o755, exist_ok=True)  # where no bind brought it: in the root's tmpfs
        except OSError:
            continue  # a read-only bind without it: nothing to hide
        mount("tmpfs", inside(hidden), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k,nr_inodes=1024")
    for target, handle, is_dir in held:
        if target in allowed:
            _bind(handle, inside(target), is_dir)
    for hidden in spec["hidden"]:
        if os.path.isdir(inside(hidden)):
            mount(None, inside(hidden), None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for _, handle, _ in held:
        os.close(handle)
    for link, points_to in spec["links"]:
        if not os.path.lexists(inside(link)):
            os.symlink(points_to, inside(link))
    owner = f"uid={uid},gid={gid}"
    size_mb = config["tmpfs_mb"]
    for directory, options in (
        ("/tmp", f"size={size_mb}m,nr_inodes=4096"),
        ("/dev/shm", f"size={size_mb}m,nr_inodes=256"),
    ):
        os.makedirs(inside(directory), 0o755, exist_ok=True)
        mount("tmpfs", inside(directory), "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,{owner},{options}")
    # No /proc (issue 37): the inode number of each /proc/<pid> entry comes from the kernel-wide counter that
    # pipes and sockets also draw from, so looking up /proc entries advances and reads state every run shares;
    # and /proc/self/cgroup would name the caller's pid and the run's index. Nothing a test program needs.
    os.mkdir(inside(work_dir), 0o700)
    for name, data in config["files"].items():
        with open(os.path.join(inside(work_dir), name), "wb") as handle:
            handle.write(data)
        os.chown(os.path.join(inside(work_dir), name), uid, gid)
    os.chown(inside(work_dir), uid, gid)
    os.mkdir(inside("/.old"))
    _call(_libc.syscall(PIVOT_ROOT, os.fsencode(new_root), os.fsencode(inside("/.old"))), "pivot_root")
    os.chdir("/")
    _call(_libc.umount2(b"/.old", MNT_DETACH), "umount the old root")
    os.rmdir("/.old")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    if devices:
        mount(None, "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC)


def _make_devices(directory: str) -> bool:
    """The run's own /dev: a tmpfs with fresh device nodes. False (nothing mounted) where mknod is refused."""
    os.makedirs(directory, 0o755, exist_ok=True)
    mount("tmpfs", directory, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=16k,nr_inodes=16")
    try:
        for name, minor in DEVICES:
            os.mknod(os.path.join(directory, name), 0o666 | stat.S_IFCHR, os.makedev(1, minor))
            os.chmod(os.path.join(directory, name), 0o666)  # whatever the umask
    except PermissionError:
        _call(_libc.umount2(os.fsencode(directory), MNT_DETACH), "umount /dev")
        return False
    return True


def join_cgroup(config: dict) -> None:
    """Move this process (and so all it forks) into the run's cgroups, made by the caller: init (and so the
    program) and the judge, whose work is charged to the run."""
    for path in config.get("cgroup_procs") or ():
        with open(path, "w") as handle:
            handle.write("0")
