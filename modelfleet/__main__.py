from .cli import main

# The ordinary exit here: tools that wrap `python -m modelfleet` (cProfile, coverage run, trace) act after it
# returns. The installed `modelfleet` script ends promptly (cli.entry).
raise SystemExit(main())
