# Rules of the vecops study (filled by its issue).  Conventions: see common.smk.
