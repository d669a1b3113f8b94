"""`python -m router` runs the command-line interface."""

from router.cli import main

main()
