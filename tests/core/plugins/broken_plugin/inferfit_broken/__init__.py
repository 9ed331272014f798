"""A plugin whose import fails, as a half-installed third-party plugin would."""

raise ImportError("inferfit_broken needs a library that is not installed (libfoo)")
