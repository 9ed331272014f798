"""Built-in panels, one module per panel (registered by ``inferfit.tui.builtin``)."""
