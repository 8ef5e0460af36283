"""Errors a user can act on: each renders as one line naming the file, the problem and the fix."""


class HwprofError(Exception):
    """Base class; the CLI prints str(error) as one line and exits non-zero."""


class InputError(HwprofError):
    def __init__(self, path, problem: str, fix: str = ""):
        self.path, self.problem, self.fix = str(path), problem, fix
        msg = f"{self.path}: {problem}"
        if fix:
            msg += f" -- {fix}"
        super().__init__(msg)


class MissingDependency(HwprofError):
    pass


class RunExists(HwprofError):
    pass


class FormatVersionError(HwprofError):
    pass
