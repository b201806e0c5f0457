"""The one exception class of the embshard package."""


class EmbshardError(ValueError):
    """An embshard error: the C++ library's embshard::Error (its message names
    the file, table, field and value at fault, and the failed check), or a
    check of the Python layer (a TorchRec config or sample batch, a plan file)
    with a message of the same kind."""
