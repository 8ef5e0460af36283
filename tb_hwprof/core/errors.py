"""Errors a user can act on: each renders as one line naming the file, the problem and the fix."""


class HwprofError(Exception):
    """Base class; the CLI prints str(error) as one line and exits non-zero.  A message quotes damaged
    input (SQLite's own words quote a damaged schema): control characters and line breaks in it are
    escaped, so the line stays one line and a terminal escape sequence is never sent as such."""

    def __init__(self, message="", *args):
        super().__init__(printable(message) if isinstance(message, str) else message, *args)


def printable(text: str) -> str:
    """`text` with every character that is not printable (controls, line and paragraph separators)
    as its escape; spaces stay."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii") for c in text)


class InputError(HwprofError):
    def __init__(self, path, problem: str, fix: str = ""):
        self.path, self.problem, self.fix = str(path), problem, fix
        msg = f"{self.path}: {problem}"
        if fix:
            msg += f" -- {fix}"
        super().__init__(msg)

    def __reduce__(self):  # pickled as its parts (an error crossing to another process stays itself)
        return type(self), (self.path, self.problem, self.fix)


class MissingDependency(HwprofError):
    pass


class RunExists(HwprofError):
    pass


class FormatVersionError(HwprofError):
    pass
