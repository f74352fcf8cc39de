"""What counts as the user's mistake: errors the command line reports in one line, no traceback.

The API raises ``ValueError`` (a wrong value) and ``TypeError`` (a wrong type or an unknown
keyword) for bad arguments, and errors that mix in :class:`UserError` for problems with the
user's files, data or machine (an unreadable image, weights that cannot be fetched). The
command line prints the message of a ``ValueError`` or a :class:`UserError` and exits with 2;
any other exception is a defect of this package and keeps its traceback.
"""

from __future__ import annotations

import errno


class UserError(Exception):
    """Mixed into an exception whose message says all the user needs: what, where, how to fix."""


class OptionError(UserError, TypeError):
    """An unknown keyword, or a value of the wrong type, given to a strategy or a function."""


#: errors of the disk that say all a user needs (errno -> the fix)
_DISK_ERRORS = {errno.ENOSPC: "free some space", errno.EDQUOT: "free some space within your quota",
                errno.EROFS: "the file system is read-only: write elsewhere (--out, --log-dir)"}


def user_message(error: BaseException) -> str:
    """The message of ``error`` as the user should read it.

    An exception re-raised by a DataLoader worker carries the worker's traceback in its
    message ("Caught X in DataLoader worker process 0. Original Traceback ..."): its last
    line holds the original message, which is what is returned. Other messages are returned
    as they are.
    """
    if isinstance(error, OSError) and error.errno in _DISK_ERRORS:
        where = f" writing {error.filename}" if error.filename else ""
        return (f"{error.strerror or _DISK_ERRORS[error.errno]}{where}: {_DISK_ERRORS[error.errno]}; the run "
                "keeps its last checkpoint and results, so the same command resumes it")
    text = str(error).strip()
    if "Original Traceback" in text:
        name = type(error).__name__
        for line in reversed(text.splitlines()):
            head, sep, rest = line.partition(": ")
            if sep and head.rpartition(".")[2] == name:
                return rest
    return text


__all__ = ["OptionError", "UserError", "user_message"]
