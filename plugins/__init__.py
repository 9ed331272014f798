"""inferfit's built-in plugins that are not probes: sizing, batch controllers, exporters."""
