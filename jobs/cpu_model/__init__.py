"""`make cpu-model`: the strongest searchless model two cores make, with its evidence."""
