"""The one error this library raises for a model it cannot use."""

from __future__ import annotations


class MiniLMError(RuntimeError):
    """A model file is missing, unreadable or says something this encoder does not implement.

    ``path`` is the file at fault and ``field`` the key or tensor inside it (``""`` when the
    whole file is at fault); both also appear in the message.
    """

    def __init__(self, path: object, message: str, *, field: str = "") -> None:
        self.path = str(path)
        self.field = field
        where = f"{self.path}: field '{field}'" if field else self.path
        super().__init__(f"{where}: {message}")
