import sys

from services.cli import main

sys.exit(main(["agent", *sys.argv[1:]]))
