"""User-facing errors: one line that says what was wrong and what to do."""


class R2AError(Exception):
    """An error whose message is shown to the user as is, with a non-zero exit."""


class DataError(R2AError):
    """A dataset file is missing, malformed or of an unknown format."""


class DatabaseError(R2AError):
    """The database cannot be reached or a statement failed."""


class ResourceError(R2AError):
    """The work needs more memory than the process may use."""
