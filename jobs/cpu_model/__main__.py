"""`python -m jobs.cpu_model`: the recipe (jobs/cpu_model/recipe.py)."""

import sys

from jobs.cpu_model.recipe import main

sys.exit(main())
