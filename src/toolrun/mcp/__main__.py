"""`python -m toolrun.mcp serve TARGET [--http --host --port]`."""

from toolrun.mcp._cli import main

main()
