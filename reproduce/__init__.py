"""End-to-end reproduction scripts, one module per paper table or figure (`python -m reproduce --help`)."""
