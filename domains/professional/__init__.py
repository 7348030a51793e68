"""The professional family: finance, unit conversion, physics, chemistry and statistics calculations
whose answers come from the field's libraries (numpy-financial, pint, periodictable, scipy.stats)
(`domains.professional.calculations`), as single-turn domains (`domains.professional.domain`)."""
