"""Where `save_weights` and `save_checkpoint` may write (docs/learner.md, "Saved directories"):
an absolute path whose parent exists, naming nothing, an empty directory, or a directory the
learner saved earlier (manifest.py: `foreign_content`). Anything else is refused before a byte is
written. The directory is written as DIR.tmp-<pid> and then takes DIR's place in one rename (an
exchange where DIR exists), so DIR is always whole: the old one or the new one."""
import ctypes
import errno
import os
import shutil
import stat
import sys
from typing import Callable, Tuple

from .errors import bad, os_error
from .manifest import LEARNER, foreign_content

_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def check_path(path, what: str) -> str:
    """An absolute path without NUL, normalised (no trailing slash, no `..`); else 400."""
    if not isinstance(path, str) or not path:
        raise bad(f"{what}: dir must be a non-empty string, received {path!r:.200}")
    if "\0" in path:
        raise bad(f"{what}: dir {path!r:.200} holds a NUL byte")
    if not os.path.isabs(path):
        raise bad(f"{what}: dir {path!r:.200} is relative: give an absolute path "
                  "(the learner's working directory is not the caller's)")
    return os.path.normpath(path)


def check_dest(dest, what: str) -> Tuple[str, bool]:
    """(dest normalised, whether it exists): refuses, naming it, a missing parent, a file, a
    symbolic link, or a non-empty directory the learner did not write."""
    dest = check_path(dest, what)
    parent, name = os.path.split(dest)
    if not name:
        raise bad(f"{what}: dir {dest} is the root directory")
    try:
        if not stat.S_ISDIR(os.stat(parent).st_mode):
            raise bad(f"{what}: {parent} (the parent of {dest}) is not a directory")
        st = os.lstat(dest)
    except FileNotFoundError as e:
        if e.filename == parent or not os.path.isdir(parent):
            raise bad(f"{what}: the parent directory {parent} of {dest} does not exist "
                      "(the learner does not create it)") from None
        return dest, False
    except OSError as e:  # ENAMETOOLONG, EACCES, ELOOP, ...
        raise bad(f"{what}: {dest}: {e.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise bad(f"{what}: {dest} is a symbolic link; the learner replaces only a directory it saved "
                  "or an empty one; nothing was changed")
    if not stat.S_ISDIR(st.st_mode):
        raise bad(f"{what}: {dest} is a file, not a directory; nothing was changed")
    try:
        foreign = foreign_content(dest) if os.listdir(dest) else None
    except OSError as e:
        raise bad(f"{what}: {dest}: {e.strerror}") from None
    if foreign is not None:
        raise bad(f"{what}: {dest} is a directory {LEARNER} did not save ({foreign}); it replaces only "
                  "a directory it saved or an empty one; nothing was changed")
    return dest, True


def _exchange(a: str, b: str) -> bool:
    """Swaps two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where that is not
    available (another system, a file system without it)."""
    if not sys.platform.startswith("linux"):
        return False
    fn = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if fn is None:
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), b)


def replace_dir(tmp: str, dest: str, exists: bool) -> None:
    """Moves the whole tmp directory onto dest (checked by check_dest); the old dest is removed."""
    if not exists or not os.listdir(dest):
        os.rename(tmp, dest)  # onto nothing or an empty directory: one step; never onto anything else
        return
    if _exchange(tmp, dest):
        shutil.rmtree(tmp)  # now the old directory
        return
    aside = f"{dest}.old-{os.getpid()}"  # a kill between the renames leaves it; mempo train removes it
    os.rename(dest, aside)
    try:
        os.rename(tmp, dest)
    except OSError:
        os.rename(aside, dest)
        raise
    shutil.rmtree(aside)


def write_dir(dest, what: str, write: Callable[[str], None]) -> str:
    """Checks dest, has `write(tmp)` fill a fresh DIR.tmp-<pid>, then puts it in dest's place.
    On any failure the temp directory is removed and dest is as it was; a full disk is 507
    `no_space` (errors.os_error)."""
    dest, exists = check_dest(dest, what)
    tmp = f"{dest}.tmp-{os.getpid()}"
    try:
        os.mkdir(tmp)
    except FileExistsError:  # never removed here: a killed save's is cleaned by `mempo train` on start
        raise bad(f"{what}: {tmp} exists (left by a killed save?); the learner removes nothing it did not "
                  "create in this save: remove it and retry") from None
    except OSError as e:
        raise os_error(f"{what} {dest}", e) from None
    try:
        write(tmp)
        replace_dir(tmp, dest, exists)
    except OSError as e:
        raise os_error(f"{what} {dest}", e) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest
