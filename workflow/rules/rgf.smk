# Rules of the rgf study (filled by its issue).  Conventions: see common.smk.
