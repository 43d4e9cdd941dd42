"""The ``kvmlab`` command line: the only place errors are caught and printed."""
