"""The console: a Textual app over the findings model.

Importing this package (or ``inferfit.tui.fmt`` / ``inferfit.tui.plugins``)
never imports textual; the app, panels and screens do. The headless CLI never
imports anything below ``inferfit.tui`` except through the ``console`` and
``show`` subcommands, which load textual only when they run.
"""

from __future__ import annotations
