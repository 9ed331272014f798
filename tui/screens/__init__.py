"""Modal screens: help, export prompt, quit confirmation."""
