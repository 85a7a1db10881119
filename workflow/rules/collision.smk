# Rules of the collision study (filled by its issue).  Conventions: see common.smk.
