"""The user's whole workflow: ``setup`` (the eight steps) and ``check`` (the contract verified)."""
