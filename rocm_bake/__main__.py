import sys

from rocm_bake.cli import main

sys.exit(main())
