"""`python -m router` runs the command-line interface."""

from router.commands.entry import main

main()
