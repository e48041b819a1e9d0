"""The one error the learner answers with (docs/learner.md, "Wire protocol"): a code and an HTTP status."""
import errno


class LearnerError(Exception):
    """An error answered to the client: code (docs/learner.md) and HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def bad(message: str) -> LearnerError:
    return LearnerError("bad_request", message, 400)


# What the caller asked for cannot be written there: its request is wrong, not the learner.
_CALLER_ERRNOS = (errno.ENAMETOOLONG, errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.ELOOP,
                  errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR)


def os_error(what: str, e: OSError) -> LearnerError:
    """An OSError met while doing `what` (which names the directory): a full disk is 507
    `no_space`, a path the caller cannot use 400, anything else (EIO) 500 `io_error`."""
    where = f" ({e.filename})" if e.filename else ""
    reason = e.strerror or str(e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return LearnerError("no_space", f"{what}: {reason}{where}", 507)
    if e.errno in _CALLER_ERRNOS:
        return bad(f"{what}: {reason}{where}")
    return LearnerError("io_error", f"{what}: {reason}{where}", 500)
