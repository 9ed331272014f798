"""Built-in probes, one module each. Probes never import textual."""
