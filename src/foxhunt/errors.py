"""One exception hierarchy. A user sees `str(error)`: one line saying what, where and what to do."""


class FoxhuntError(Exception):
    """Base of every error foxhunt raises on purpose; the CLI prints it as one line, no traceback."""

    exit_code = 1


class ConfigError(FoxhuntError):
    """A configuration file, key, value or profile is wrong."""


class DataError(FoxhuntError):
    """Market data could not be read, is malformed, or is missing from the store."""


class ValidationError(DataError):
    """A data row breaks a domain rule (docs/domain.md#bars-and-import-checks); the message
    names the row and the rule."""

    def __init__(self, rule: str, row: int | None = None, source: str | None = None, detail: str = ""):
        self.rule, self.row, self.source = rule, row, source
        where = source or "input"
        if row is not None:
            where += f", row {row}"
        super().__init__(f"{where}: {rule}" + (f" ({detail})" if detail else ""))


class UnknownSymbolError(FoxhuntError):
    """A symbol with no instrument spec."""


class CheckpointError(FoxhuntError):
    """A checkpoint is missing, corrupt or does not fit the network it is loaded into."""
