"""Live migration, measured and verified: ``kvmlab migrate``."""
