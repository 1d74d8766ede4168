import sys

from psijax.cli.main import main

sys.exit(main())
