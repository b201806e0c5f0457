"""The one exception class of the embshard package, and its warnings' aim."""

import os
import sys
import warnings


class EmbshardError(ValueError):
    """An embshard error: the C++ library's embshard::Error (its message names
    the file, table, field and value at fault, and the failed check), or a
    check of the Python layer (a TorchRec config or sample batch, a plan file)
    with a message of the same kind."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def warn_user(message, category):
    """warnings.warn attributed to the first caller outside this package: the
    user's own line, however deep in the package the warning is found
    (a fixed stacklevel would name a line of embshard's instead)."""
    frame, level = sys._getframe(1), 2  # level 2 is the frame calling warn_user
    while frame is not None and \
            os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _PACKAGE:
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
