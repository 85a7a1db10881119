# Rules of the bsp study (filled by its issue).  Conventions: see common.smk.
